//! The server side of the client handshake shared by the tracker and the data master: check
//! the preamble, send a nonce, verify the HMAC proof of the job secret, answer 1 or 0.

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::auth::{self, PROOF_LEN, Purpose};
use super::preamble;

/// Authenticates a newly accepted client for `purpose`; the error says why it was refused.
pub async fn accept_authenticated(mut stream: TcpStream, secret: &[u8], purpose: Purpose) -> Result<TcpStream, String> {
    let mut pre = [0u8; 8];
    stream.read_exact(&mut pre).await.map_err(|e| e.to_string())?;
    preamble::check_preamble(&pre, "client").map_err(|e| e.to_string())?;
    let nonce = auth::nonce();
    let mut challenge = preamble::preamble().to_vec();
    challenge.extend_from_slice(&nonce);
    stream.write_all(&challenge).await.map_err(|e| e.to_string())?;
    let mut proof = [0u8; PROOF_LEN];
    stream.read_exact(&mut proof).await.map_err(|e| e.to_string())?;
    let ok = auth::verify(secret, purpose, &nonce, &proof);
    stream.write_all(&[u8::from(ok)]).await.map_err(|e| e.to_string())?;
    if !ok {
        return Err("it does not hold the job secret".into());
    }
    let _ = stream.set_nodelay(true);
    Ok(stream)
}
