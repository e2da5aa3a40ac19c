//! Rust types and typed exports generated from the `lock-sm` world in `wit/`.
//!
//! The command and outcome types get serde derives so the log and the wire
//! can carry them unchanged; [`crate::command`] adds constructors and
//! `Display` on top.

wasmtime::component::bindgen!({
    world: "lock-sm",
    path: "../wit/lock-sm.wit",
    additional_derives: [serde::Serialize, serde::Deserialize, PartialEq, Eq],
});
