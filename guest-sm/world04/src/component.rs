//! The WebAssembly export layer (wasm builds only): `wit-bindgen` generates
//! the types of world `lockd:sm@0.4.0` and its `Guest` trait; the 0.3
//! module's export layer implements everything 0.3 has (the types are the
//! same), and `pick` is added here.

wit_bindgen::generate!({
    world: "lock-sm",
    path: "../../wit/lock-sm-0.4.wit",
});

/// What world 0.4 adds to the shared export layer.
macro_rules! world_exports {
    () => {
        fn pick(_key: String, leaving: Option<Holder>, candidates: Vec<Candidate>) -> Option<u32> {
            let leaving = leaving.map(n::Holder::from);
            let candidates: Vec<n::Candidate> = candidates
                .into_iter()
                .map(|c| n::Candidate {
                    holder: c.holder.into(),
                    mode: c.mode.into(),
                    priority: c.priority,
                })
                .collect();
            n::pick(leaving.as_ref(), &candidates)
        }
    };
}

include!("../../world03/src/exports.rs");
