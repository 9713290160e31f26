//! Push sources and their credentials, for the control plane and operators: a source registered
//! at dispatch (with its job granted) and its token returned, the token again, revoked, and the
//! source dropped at the job's end. No login is created: a source's token is what proves a
//! shipper is that source (`cortex_buffer_core::push::source_token`; checked on every push in
//! `sql::check_mapping`).

use pgrx::pg_sys;
use pgrx::prelude::*;
use pgrx::Uuid;

use crate::job::authority::{fleet_caller, installation_secret};
use crate::pg::privilege::as_definer;
use crate::pg::spi_util::spi;
use crate::pg::OrRaise;
use cortex_buffer_core::error::{CbError, SqlState};
use cortex_buffer_core::push::{check_source, source_token};

fn fleet_only(what: &str) -> Result<(), CbError> {
    if fleet_caller() {
        return Ok(());
    }
    Err(CbError::new(SqlState::InsufficientPrivilege, format!("only the control plane or an operator {what}"))
        .with_hint("Grant cortex_buffer_control_plane to the role that dispatches jobs (or cortex_buffer_operator)."))
}

/// Whether the caller may make a source trusted with every job: an operator's (or a
/// superuser's) decision, never the control plane's, which registers pods' own sources.
fn operator_caller() -> bool {
    crate::pg::privilege::caller_is_superuser()
        || crate::pg::privilege::role_oid("cortex_buffer_operator")
            // SAFETY: a membership check of two existing roles.
            .is_some_and(|role| unsafe { pg_sys::has_privs_of_role(pg_sys::GetUserId(), role) })
}

fn valid_source(source: &str) -> Result<(), CbError> {
    check_source(source).map_err(|why| {
        CbError::new(SqlState::InvalidParameterValue, format!("invalid source: {why}"))
            .with_hint("See docs/api.md, register_push_source.")
    })
}

fn not_registered(source: &str) -> CbError {
    CbError::new(SqlState::NoDataFound, format!("push source \"{source}\" is not registered"))
        .with_hint("Register it first: SELECT cortex_buffer.register_push_source(<source>, <job>).")
}

/// What a source's token is made of: its generation and its row's salt.
type TokenRow = (i32, [u8; 16]);

/// The token of `source` for its row.
fn token_of(source: &str, (generation, salt): TokenRow) -> Result<String, CbError> {
    Ok(source_token::issue(&installation_secret()?, source, generation, &salt))
}

/// One statement as the definer role returning the source's `token_generation, token_salt`, if
/// a row.
fn token_row_by(sql: &str, args: Vec<pgrx::datum::DatumWithOid<'_>>) -> Result<Option<TokenRow>, CbError> {
    as_definer(|| {
        Spi::connect_mut(|c| {
            let rows = c.update(sql, Some(1), &args).map_err(spi)?;
            let Some(r) = rows.into_iter().next() else { return Ok(None) };
            let generation = r.get::<i32>(1).map_err(spi)?.unwrap_or(1);
            let salt = r.get::<Uuid>(2).map_err(spi)?.map(|u| *u.as_bytes()).unwrap_or_default();
            Ok(Some((generation, salt)))
        })
    })
}

/// Why a statement on `source` that was limited to what the caller may act on found no row:
/// P0002 when the source is not registered, 42501 when it is trusted with every job (the
/// statement itself carried the condition, so no change between a check and the act can slip
/// through).
fn missed(source: &str, what: &str) -> CbError {
    let all_jobs = as_definer(|| {
        Spi::connect(|c| {
            let rows = c
                .select(
                    "SELECT all_jobs FROM cortex_buffer.push_source WHERE source OPERATOR(pg_catalog.=) $1",
                    Some(1),
                    &[source.into()],
                )
                .map_err(spi)?;
            match rows.into_iter().next() {
                Some(r) => r.get::<bool>(1).map_err(spi),
                None => Ok(None),
            }
        })
    });
    match all_jobs {
        Ok(Some(true)) => trusted_with_every_job(source, what),
        Ok(_) => not_registered(source),
        Err(e) => e,
    }
}

fn trusted_with_every_job(source: &str, what: &str) -> CbError {
    CbError::new(
        SqlState::InsufficientPrivilege,
        format!("push source \"{source}\" is trusted with every job: only an operator {what} it"),
    )
    .with_hint(
        "The control plane registers, and gets the tokens of, pods' own sources; a node's source is an operator's.",
    )
}

/// Registers `source` (or updates it: re-registering is how a dispatch reuses a source), grants it
/// `job_id` when given, and returns its token. No login is needed: `login` NULL lets any role with
/// `cortex_buffer_pusher` push as the source with the token; a login restricts it further. On a
/// source already registered, `all_jobs`, `login` and `note` change only when given.
#[pg_extern(volatile)]
#[search_path(pg_catalog, pg_temp)]
fn register_push_source(
    source: Option<&str>,
    job_id: default!(Option<Uuid>, "NULL"),
    all_jobs: default!(Option<bool>, "NULL"),
    login: default!(Option<&str>, "NULL"),
    note: default!(Option<&str>, "NULL"),
) -> String {
    let source = source.ok_or_else(|| {
        CbError::new(SqlState::NullValueNotAllowed, "source must not be NULL").with_hint("Pass the source's name.")
    });
    let run = || -> Result<String, CbError> {
        let source = source?;
        fleet_only("registers push sources")?;
        valid_source(source)?;
        if let Some(login) = login {
            if crate::pg::privilege::role_oid(login).is_none() {
                return Err(CbError::new(SqlState::UndefinedObject, format!("role \"{login}\" does not exist"))
                    .with_hint("Pass NULL (any pusher presenting the token), or an existing role."));
            }
        }
        let operator = operator_caller();
        if all_jobs == Some(true) && !operator {
            return Err(CbError::new(
                SqlState::InsufficientPrivilege,
                "only an operator registers a source trusted with every job (all_jobs)",
            )
            .with_hint(
                "The control plane registers a pod's own source with its job (job_id); an operator registers a node's.",
            ));
        }
        // The control plane never changes (nor gets the token of) a source an operator trusted
        // with every job.
        let row = token_row_by(
            "INSERT INTO cortex_buffer.push_source AS s (source, login, all_jobs, note)
             VALUES ($1, $2::pg_catalog.name, COALESCE($3, false), $4)
             ON CONFLICT (source) DO UPDATE
                SET login = COALESCE(excluded.login, s.login), all_jobs = COALESCE($3, s.all_jobs),
                    note = COALESCE(excluded.note, s.note),
                    -- Trusted with every job from now on: tokens issued before (the row may have
                    -- been a pod's, its token in a pod's hands) must not carry that trust.
                    token_salt = CASE WHEN COALESCE($3, s.all_jobs) AND NOT s.all_jobs
                                      THEN pg_catalog.gen_random_uuid() ELSE s.token_salt END
              WHERE $5 OR NOT s.all_jobs
             RETURNING s.token_generation, s.token_salt",
            vec![source.into(), login.into(), all_jobs.into(), note.into(), operator.into()],
        )?
        .ok_or_else(|| trusted_with_every_job(source, "registers"))?;
        if let Some(job) = job_id {
            as_definer(|| {
                Spi::connect_mut(|c| {
                    c.update(
                        "INSERT INTO cortex_buffer.push_grant (source, job_id) VALUES ($1, $2) ON CONFLICT DO NOTHING",
                        None,
                        &[source.into(), job.into()],
                    )
                    .map(|_| ())
                    .map_err(spi)
                })
            })?;
        }
        token_of(source, row)
    };
    run().or_raise()
}

/// The current token of `source`, for its shipper (`--source-token`). The same until revoked.
#[pg_extern(volatile, strict)]
#[search_path(pg_catalog, pg_temp)]
fn push_source_token(source: &str) -> String {
    let run = || -> Result<String, CbError> {
        fleet_only("issues source tokens")?;
        valid_source(source)?;
        let row = token_row_by(
            "SELECT token_generation, token_salt FROM cortex_buffer.push_source
              WHERE source OPERATOR(pg_catalog.=) $1 AND ($2 OR NOT all_jobs)",
            vec![source.into(), operator_caller().into()],
        )?
        .ok_or_else(|| missed(source, "gets the token of"))?;
        token_of(source, row)
    };
    run().or_raise()
}

/// Revokes every token of `source` issued so far and returns its new one.
#[pg_extern(volatile, strict)]
#[search_path(pg_catalog, pg_temp)]
fn revoke_push_source_token(source: &str) -> String {
    let run = || -> Result<String, CbError> {
        fleet_only("revokes source tokens")?;
        valid_source(source)?;
        let row = token_row_by(
            "UPDATE cortex_buffer.push_source SET token_generation = token_generation OPERATOR(pg_catalog.+) 1
              WHERE source OPERATOR(pg_catalog.=) $1 AND ($2 OR NOT all_jobs) RETURNING token_generation, token_salt",
            vec![source.into(), operator_caller().into()],
        )?
        .ok_or_else(|| missed(source, "revokes the token of"))?;
        token_of(source, row)
    };
    run().or_raise()
}

/// Drops `source`, its grants and its last confirmation (its pushed files and their rows stay):
/// true when it was there. A job's sidecar source is dropped once its job is terminal: a plan of
/// a later attempt trusts the source's files only after a confirmation (`confirm_pushed`), which
/// a dropped source cannot give. Its tokens die with it: a source registered again under the same
/// name has a new salt.
#[pg_extern(volatile, strict)]
#[search_path(pg_catalog, pg_temp)]
fn drop_push_source(source: &str) -> bool {
    let run = || -> Result<bool, CbError> {
        fleet_only("drops push sources")?;
        valid_source(source)?;
        let dropped = token_row_by(
            "DELETE FROM cortex_buffer.push_source
              WHERE source OPERATOR(pg_catalog.=) $1 AND ($2 OR NOT all_jobs) RETURNING token_generation, token_salt",
            vec![source.into(), operator_caller().into()],
        )?;
        match dropped {
            Some(_) => Ok(true),
            None => match missed(source, "drops") {
                e if e.state == SqlState::NoDataFound => Ok(false),
                e => Err(e),
            },
        }
    };
    run().or_raise()
}

extension_sql!(
    r#"
COMMENT ON FUNCTION cortex_buffer.register_push_source(text, uuid, boolean, text, text) IS
'Registers a push source, or updates it (all_jobs, login and note, each when given), grants it job_id when given, and returns its token: what its shipper passes as source_token with every call (--source-token). No login is needed: with login NULL any role with cortex_buffer_pusher that presents the token pushes as the source; a login restricts it to that role''s members as well. For the control plane at dispatch, and operators.';
COMMENT ON FUNCTION cortex_buffer.push_source_token(text) IS
'The current token of a push source (the same until revoked, or until the source is dropped). For the control plane (pods'' own sources: never one trusted with every job) and operators.';
COMMENT ON FUNCTION cortex_buffer.revoke_push_source_token(text) IS
'Revokes every token of a push source issued so far (its generation counts up) and returns the new one. For the control plane (pods'' own sources) and operators.';
COMMENT ON FUNCTION cortex_buffer.drop_push_source(text) IS
'Drops a push source with its grants, its last confirmation and every token issued for it (a source registered again under the name has new ones; its pushed files stay): true when it was there. For a sidecar''s source once its job is terminal: a later attempt''s plan trusts the source''s files only after a confirmation, which a dropped source cannot give. For the control plane and operators.';
"#,
    name = "push_sources_comments",
    requires = ["push_schema", register_push_source, push_source_token, revoke_push_source_token, drop_push_source]
);
