//! Assembles every generated test module with the real `ptxas` for sm_75, sm_80 and sm_90 and
//! checks that it is accepted and that no entry spills; the simulator's parser must read each one
//! back into the same IR.

mod codegen_common;

use codegen_common::*;
use lb_ptx::{generate, ptxas, Options};

#[test]
fn every_module_assembles_without_spills() {
    let checked = Options {
        checked: true,
        ..Options::default()
    };
    let cases = [
        (spmv(), Options::default()),
        (spmv(), checked.clone()),
        (
            spmm(),
            Options {
                lanes: Some(2),
                ..Options::default()
            },
        ),
        (
            spmm(),
            Options {
                lanes: Some(2),
                ..checked.clone()
            },
        ),
        (scatter(), Options::default()),
        (scatter(), checked.clone()),
        (
            relax(),
            Options {
                tiles: Some(1),
                ..checked.clone()
            },
        ),
        (
            relax(),
            Options {
                tiles: Some(1),
                ..Options::default()
            },
        ),
        (mix(), Options::default()),
        (mix(), checked.clone()),
        (bits(), Options::default()),
        (bits(), checked.clone()),
        (fatom(), Options::default()),
        (fatom(), checked),
        (math64(), Options::default()),
    ];
    for (body, opts) in &cases {
        let g = generate(body, opts).expect("generates");
        let parsed = lb_ptx::sim::parse(&g.ptx).unwrap_or_else(|e| panic!("{}: {e:?}", body.name));
        assert_eq!(
            parsed.to_string(),
            g.ptx,
            "{}: the parser does not round-trip",
            body.name
        );
        let mut entries: Vec<&str> = g
            .plans
            .iter()
            .flat_map(|p| p.kernels.iter())
            .map(|k| k.entry.as_ref())
            .collect();
        entries.sort_unstable();
        for report in ptxas::assert_assembles(&body.name, &g.ptx) {
            let mut names: Vec<&str> = report.entries.iter().map(|e| e.name.as_str()).collect();
            names.sort_unstable();
            assert_eq!(names, entries, "{}", report.log);
        }
    }
}
