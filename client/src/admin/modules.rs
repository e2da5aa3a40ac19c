//! The module requests of [`Admin`]: upgrades, the rollback, shadow
//! modules and the trusted module keys.

use bytes::Bytes;
use hyper::Method;
use serde_json::{json, Value};

use super::{with_query, Admin, AdminError};
use crate::proto::OnModuleFailure;
use crate::signature::{ModuleKeyReply, ModuleKeys};

impl Admin {
    /// Replace the lock module with the component `module`. `replaces`
    /// guards against a concurrent upgrade (default: the active module);
    /// `precheck` false skips the leader's dry run (every node still checks
    /// at apply).
    pub async fn upgrade(
        &self,
        module: Vec<u8>,
        replaces: Option<&str>,
        precheck: bool,
    ) -> Result<Value, AdminError> {
        self.upgrade_signed(module, replaces, None, precheck).await
    }

    /// [`Admin::upgrade`] carrying the module's `signature` (128 hex
    /// digits, see [`crate::signature`]): required while the cluster trusts
    /// module keys.
    pub async fn upgrade_signed(
        &self,
        module: Vec<u8>,
        replaces: Option<&str>,
        signature: Option<&str>,
        precheck: bool,
    ) -> Result<Value, AdminError> {
        let how = UpgradeHow {
            replaces,
            signature,
            precheck,
            ..UpgradeHow::default()
        };
        self.upgrade_how(module, how).await
    }

    /// Replace the lock module, every option given (see [`UpgradeHow`]).
    pub async fn upgrade_how(
        &self,
        module: Vec<u8>,
        how: UpgradeHow<'_>,
    ) -> Result<Value, AdminError> {
        let mut query = Vec::new();
        if let Some(r) = how.replaces {
            query.push(format!("replaces={r}"));
        }
        if let Some(s) = how.signature {
            query.push(format!("signature={s}"));
        }
        if !how.precheck {
            query.push("precheck=false".to_string());
        }
        if how.rollback {
            query.push("rollback=true".to_string());
        }
        if how.on_failure != OnModuleFailure::Refuse {
            query.push(format!("on_failure={}", how.on_failure.as_str()));
        }
        if how.quorum {
            query.push("quorum=true".to_string());
        }
        self.post_wasm(&with_query("/v1/admin/upgrade", &query), module.into())
            .await
    }

    /// Return to the module the active one replaced (one log entry; see
    /// the module guide, "Versions and the way back").
    pub async fn rollback(&self, precheck: bool) -> Result<Value, AdminError> {
        let path = if precheck {
            "/v1/admin/rollback"
        } else {
            "/v1/admin/rollback?precheck=false"
        };
        self.post_wasm(path, Bytes::new()).await
    }

    /// Start `module` as a shadow beside the active module.
    pub async fn start_shadow(&self, module: Vec<u8>, precheck: bool) -> Result<Value, AdminError> {
        self.start_shadow_signed(module, None, precheck).await
    }

    /// [`Admin::start_shadow`] carrying the module's `signature`; a promote
    /// then carries it too.
    pub async fn start_shadow_signed(
        &self,
        module: Vec<u8>,
        signature: Option<&str>,
        precheck: bool,
    ) -> Result<Value, AdminError> {
        let mut query = Vec::new();
        if let Some(s) = signature {
            query.push(format!("signature={s}"));
        }
        if !precheck {
            query.push("precheck=false".to_string());
        }
        self.post_wasm(&with_query("/v1/admin/shadow", &query), module.into())
            .await
    }

    /// The module keys the cluster trusts, from the leader.
    pub async fn module_keys(&self) -> Result<ModuleKeys, AdminError> {
        let addr = self.leader_addr().await?;
        self.http.get_json(&addr, "/v1/admin/module-keys").await
    }

    /// Trust `key` (64 hex digits) for module signatures: one log entry.
    pub async fn trust_module_key(&self, key: &str) -> Result<ModuleKeyReply, AdminError> {
        let v = self
            .post_json("/v1/admin/module-keys", &json!({ "key": key }))
            .await?;
        Ok(serde_json::from_value(v)?)
    }

    /// Stop trusting `key` (64 hex digits): one log entry.
    pub async fn untrust_module_key(&self, key: &str) -> Result<ModuleKeyReply, AdminError> {
        let path = format!("/v1/admin/module-keys/{key}");
        let v = self
            .send(Method::DELETE, &path, "application/json", Bytes::new())
            .await?;
        Ok(serde_json::from_value(v)?)
    }

    /// Upgrade to the running shadow module.
    pub async fn promote_shadow(&self) -> Result<Value, AdminError> {
        self.post_wasm("/v1/admin/shadow/promote", Bytes::new())
            .await
    }

    /// Stop the running shadow module.
    pub async fn abort_shadow(&self) -> Result<Value, AdminError> {
        self.post_wasm("/v1/admin/shadow/abort", Bytes::new()).await
    }
}

/// The options of an upgrade ([`Admin::upgrade_how`]).
#[derive(Clone, Copy, Debug)]
pub struct UpgradeHow<'a> {
    /// Refuse unless this module hash is the active one.
    pub replaces: Option<&'a str>,
    /// The module's signature, 128 hex digits.
    pub signature: Option<&'a str>,
    /// The leader's dry run first (default true).
    pub precheck: bool,
    /// Let the module in whatever its version (a swap back).
    pub rollback: bool,
    /// What the cluster does if the module goes out of service.
    pub on_failure: OnModuleFailure,
    /// Enact it once a majority of voters accepted it at the pre-check,
    /// even if one refused (by default a refusal blocks it).
    pub quorum: bool,
}

impl Default for UpgradeHow<'_> {
    fn default() -> Self {
        UpgradeHow {
            replaces: None,
            signature: None,
            precheck: true,
            rollback: false,
            on_failure: OnModuleFailure::Refuse,
            quorum: false,
        }
    }
}
