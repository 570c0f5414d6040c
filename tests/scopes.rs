//! Kernels declared where a module-level `super::` cannot reach them: inside a function body,
//! with every import local to that body. The generated module names nothing of its
//! surroundings, so these compile and run like kernels at module level.

#[test]
fn a_kernel_declared_inside_a_function_body_runs() {
    use lb::prelude::*;

    #[load_balanced(schedule = "thread_mapped, merge_path", reduce = "sum", output = "y")]
    fn spmv(a: &Csr<f32>, x: &[f32], #[atom] nz: usize) -> f32 {
        a.values[nz] * x[a.col_indices[nz] as usize]
    }

    let a = lb::generate::power_law(500, 400, 6.0, 11);
    let x = lb::generate::random_vector(a.num_cols, 12);
    let expected: Vec<f64> = (0..a.num_rows)
        .map(|r| {
            (a.row_offsets[r]..a.row_offsets[r + 1])
                .map(|nz| f64::from(a.values[nz]) * f64::from(x[a.col_indices[nz] as usize]))
                .sum()
        })
        .collect();
    let mut cpu = vec![0.0f32; a.num_rows];
    spmv::cpu(&a, &x, &mut cpu);
    let dev = Device::simulator();
    let da = DeviceCsr::upload(&dev, &a).unwrap();
    let dx = dev.upload(&x).unwrap();
    for &s in spmv::SCHEDULES {
        let mut dy = dev.zeros::<f32>(a.num_rows).unwrap();
        spmv::launch_with(&dev, s, &da, &dx, &mut dy).unwrap();
        let y = dy.download().unwrap();
        for (r, e) in expected.iter().enumerate() {
            let tolerance = 1e-4 * (1.0 + e.abs());
            assert!(
                (f64::from(y[r]) - e).abs() <= tolerance,
                "{}: row {r}",
                s.name()
            );
            assert!((f64::from(cpu[r]) - e).abs() <= tolerance, "cpu: row {r}");
        }
    }
}

#[test]
fn a_kernel_with_atomics_inside_a_function_body_runs() {
    use lb::prelude::{atomic_add, load_balanced, Csr, Device, DeviceCsr};

    /// In-degree counting: one atomic add per edge, at the edge's head.
    #[load_balanced(schedule = "thread_mapped, binning")]
    fn in_degree(a: &Csr<f32>, degree: &mut [u32], #[atom] e: usize) {
        atomic_add(&mut degree[a.col_indices[e] as usize], 1u32);
    }

    let a = lb::generate::power_law(300, 300, 4.0, 5);
    let mut expected = vec![0u32; a.num_cols];
    for &c in &a.col_indices {
        expected[c as usize] += 1;
    }
    let mut cpu = vec![0u32; a.num_cols];
    in_degree::cpu(&a, &mut cpu);
    assert_eq!(cpu, expected);
    let dev = Device::simulator();
    let da = DeviceCsr::upload(&dev, &a).unwrap();
    for &s in in_degree::SCHEDULES {
        let mut dd = dev.zeros::<u32>(a.num_cols).unwrap();
        in_degree::launch_with(&dev, s, &da, &mut dd).unwrap();
        assert_eq!(dd.download().unwrap(), expected, "{}", s.name());
    }
}
