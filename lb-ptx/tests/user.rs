//! Schedules written outside lb (`lb_ptx::user`): the embedded form of a kernel survives the
//! round trip exactly (float literals that JSON cannot spell, 128-bit integer literals, every
//! body shape of the codegen tests, the options), a damaged or foreign text is an error, and
//! `generate_user` builds a schedule's module as `generate_safe` builds a built-in's.

mod codegen_common;

use codegen_common::*;
use lb_ptx::body::{Block, Body, Reduce, Stmt, Ty};
use lb_ptx::plan::Plan;
use lb_ptx::user::{embed, unembed, UserSchedule};
use lb_ptx::{generate_safe, generate_user, GenError, Options, Schedule, ScheduleTemplate};

/// The body and options after `embed` then `unembed`, compared through `Debug`, which spells
/// every float by value (NaN included, where `==` would fail) and every field.
fn round_trip(body: &Body, options: &Options) {
    let text = embed(body, options).unwrap();
    let (b, o) = unembed(&text).unwrap();
    assert_eq!(format!("{b:?}"), format!("{body:?}"), "{}", body.name);
    assert_eq!(o, *options, "{}", body.name);
}

#[test]
fn every_body_and_the_options_survive_the_round_trip() {
    let options = Options {
        schedules: vec![Schedule::MergePath, Schedule::GroupMapped(16)],
        target: "sm_90".into(),
        block: 128,
        items_per_thread: 5,
        checked: true,
        lanes: Some(2),
        fma: false,
        ..Options::default()
    };
    for body in [spmv(), math64(), spmm(), scatter(), relax(), mix()] {
        round_trip(&body, &options);
        round_trip(&body, &Options::default());
    }
}

#[test]
fn literals_json_cannot_spell_survive_the_round_trip() {
    let mut body = spmv();
    let specials = [
        float(Ty::F64, f64::INFINITY),
        float(Ty::F64, f64::NEG_INFINITY),
        float(Ty::F64, f64::NAN),
        float(Ty::F64, -0.0),
        float(Ty::F64, f64::MIN_POSITIVE / 2.0),
        int(Ty::I64, i128::from(i64::MIN)),
        int(Ty::U64, i128::from(u64::MAX)),
    ];
    body.block = Block {
        stmts: specials.iter().cloned().map(Stmt::Expr).collect(),
        value: body.block.value.clone(),
    };
    let (back, _) = unembed(&embed(&body, &Options::default()).unwrap()).unwrap();
    for (want, got) in specials.iter().zip(&back.block.stmts) {
        let Stmt::Expr(got) = got else {
            panic!("statement kind changed: {got:?}");
        };
        assert_eq!(format!("{got:?}"), format!("{want:?}"));
        if let (
            lb_ptx::body::ExprKind::Lit(lb_ptx::body::Lit::Float(a)),
            lb_ptx::body::ExprKind::Lit(lb_ptx::body::Lit::Float(b)),
        ) = (&want.kind, &got.kind)
        {
            assert_eq!(a.to_bits(), b.to_bits(), "bits of {a}");
        }
    }
}

#[test]
fn a_damaged_or_foreign_text_is_an_error() {
    let text = embed(&spmv(), &Options::default()).unwrap();
    for bad in [
        String::new(),
        text[..text.len() / 2].to_string(),
        text.replacen("\"format\":1", "\"format\":2", 1),
        "{\"format\":1}".to_string(),
    ] {
        match unembed(&bad) {
            Err(GenError::Unsupported(msg)) => assert!(msg.contains("rebuild"), "{msg}"),
            other => panic!("{bad:?}: {other:?}"),
        }
    }
}

/// `merge_path` under another name: a user schedule whose module must be the built-in's with
/// the entries renamed.
struct Renamed(&'static str);

impl ScheduleTemplate for Renamed {
    fn plan(&self, body: &Body, opts: &Options) -> Result<Plan, GenError> {
        Ok(self.plans(body, opts)?.remove(0))
    }

    fn plans(&self, body: &Body, opts: &Options) -> Result<Vec<Plan>, GenError> {
        lb_ptx::primitives::work_oriented::plans(body, opts, self.0, false)
    }

    fn build(
        &self,
        body: &Body,
        opts: &Options,
        plan: &Plan,
    ) -> Result<Vec<lb_ptx::ir::Kernel>, GenError> {
        Schedule::NonzeroSplit.template().build(body, opts, plan)
    }
}

// SAFETY: the kernels are `nonzero_split`'s, built from this plan.
unsafe impl UserSchedule for Renamed {
    fn name(&self) -> &'static str {
        self.0
    }
}

#[test]
fn a_user_module_is_the_built_in_one_under_its_own_name() {
    let mut body = spmv();
    body.reduce = Some((Ty::F32, Reduce::Sum));
    let opts = Options {
        schedules: vec![Schedule::NonzeroSplit],
        ..Options::default()
    };
    let builtin = generate_safe(&body, &opts).unwrap();
    let user = generate_user(&body, &opts, &Renamed("split_again")).unwrap();
    assert_eq!(
        user.ptx,
        builtin.ptx.replace("nonzero_split", "split_again"),
        "the same kernels, renamed"
    );
    assert_eq!(user.plans.len(), builtin.plans.len());
    assert!(user.plans.iter().all(|p| p.schedule == "split_again"));
    assert_eq!(user.gathers, builtin.gathers);
    assert_eq!(user.unchecked.is_some(), builtin.unchecked.is_some());
    lb_ptx::ptxas::assert_assembles("split_again", &user.ptx);
}

#[test]
fn bad_names_and_blocks_are_errors() {
    let body = spmv();
    for name in ["merge_path", "thread_mapped", "a-b", "", "ü"] {
        let err = generate_user(&body, &Options::default(), &Renamed(name)).unwrap_err();
        assert!(matches!(err, GenError::Unsupported(_)), "{name:?}: {err}");
    }
    let opts = Options {
        block: 48,
        ..Options::default()
    };
    let err = generate_user(&body, &opts, &Renamed("ok_name")).unwrap_err();
    assert!(matches!(err, GenError::BadBlock { .. }), "{err}");
}
