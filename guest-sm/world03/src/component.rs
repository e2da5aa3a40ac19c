//! The WebAssembly export layer (wasm builds only): `wit-bindgen` generates
//! the types of world `lockd:sm@0.3.0` and its `Guest` trait; [`Exports`]
//! implements it by converting WIT values to the logic's types one to one
//! (the logic is the superset of 0.2 and 0.3, so nothing is dropped) and
//! calling the one [`LockState`] this instance owns.

wit_bindgen::generate!({
    world: "lock-sm",
    path: "../../wit/lock-sm-0.3.wit",
});

/// World 0.3 adds nothing to the shared export layer.
macro_rules! world_exports {
    () => {};
}

include!("exports.rs");
