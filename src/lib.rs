//! capot: noise-robust dense retrieval. A frozen HNSW index of document vectors, several query
//! encoders aligned to it with CAPOT, and the service that routes and hot-swaps between them.

pub mod align;
pub mod atomic_file;
pub mod blocking;
pub mod clock;
pub mod dataset;
pub mod encoder;
pub mod eval;
pub mod index;
pub mod jobs;
pub mod live;
pub mod model;
pub mod noise;
pub mod query;
pub mod registry;
pub mod repair;
pub mod server;
pub mod store;
pub mod sync;

#[cfg(test)]
mod fuzz;
#[cfg(test)]
pub(crate) mod test_assets;
