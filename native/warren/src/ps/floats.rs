//! `f32` arrays in JSON frames as hex strings of their little-endian bytes: exact (no decimal
//! round trip) and decoded without parsing numbers. For `#[serde(with = "floats")]`.

use serde::{Deserialize, Deserializer, Serializer};

/// Writes `v` as the hex string of its little-endian bytes.
pub fn serialize<S: Serializer>(v: &[f32], s: S) -> Result<S::Ok, S::Error> {
    let mut bytes = Vec::with_capacity(v.len() * 4);
    for x in v {
        bytes.extend_from_slice(&x.to_le_bytes());
    }
    s.serialize_str(&hex::encode(bytes))
}

/// Reads what [`serialize`] wrote; a string of odd length, with a non-hex digit, or not a
/// whole number of floats is an error.
pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<f32>, D::Error> {
    let s = std::borrow::Cow::<'de, str>::deserialize(d)?;
    let bytes = hex::decode(s.as_bytes()).map_err(serde::de::Error::custom)?;
    if bytes.len() % 4 != 0 {
        return Err(serde::de::Error::custom(format!("{} bytes are not a whole number of f32s", bytes.len())));
    }
    Ok(bytes.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().expect("4 bytes"))).collect())
}

#[cfg(test)]
mod tests {
    use serde::{Deserialize, Serialize};

    #[derive(Debug, Serialize, Deserialize)]
    struct V(#[serde(with = "super")] Vec<f32>);

    #[test]
    fn floats_round_trip_bit_for_bit() {
        let v = V(vec![0.1, -0.0, f32::MIN_POSITIVE, f32::MAX, 1e-45, f32::NAN]);
        let json = serde_json::to_string(&v).unwrap();
        assert_eq!(&json[..9], "\"cdcccc3d", "little-endian hex of 0.1");
        let back: V = serde_json::from_str(&json).unwrap();
        let bits = |v: &V| v.0.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&back), bits(&v));
    }

    #[test]
    fn malformed_hex_is_an_error() {
        for bad in ["\"abc\"", "\"zz000000\"", "\"000000\"", "7"] {
            assert!(serde_json::from_str::<V>(bad).is_err(), "{bad}");
        }
    }
}
