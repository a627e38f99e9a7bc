//! What a loaded checkpoint is: its version and the models, from peers or from disk.

/// A checkpoint as returned by [`super::Communicator::load_checkpoint`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Checkpoint {
    /// Number of checkpoints committed (0: fresh start, the models are empty).
    pub version: u32,
    /// The global model (the same on every worker).
    pub global: Vec<u8>,
    /// This worker's local model, if it had one.
    pub local: Option<Vec<u8>>,
}
