//! The copy kernel of [`Transport::PeerKernel`](super::Transport::PeerKernel): a device pushes a
//! piece of an all-gather into every other device's copy with its own SMs' stores over the link.
//!
//! The copy engines moved an all-gather's pieces at 95–140 GB/s per direction between H100s with
//! NVLink (docs/multi-gpu.md), under half the link; stores from the SMs are how NCCL's kernels
//! fill it, so this kernel tries them (measured against the copy engines in docs/multi-gpu.md).
//! Each thread loads 16 bytes of the piece once (`ld.global.nc.v4`) and stores them into
//! every destination (up to [`MAX_DESTINATIONS`] per launch), so the piece is read once however
//! many peers receive it. The bytes before the source's first 16-byte boundary and after its last
//! one are copied one by one by the first threads; every destination must lie at the source's
//! offset modulo 16 ([`aligned_alike`]) so that its 16-byte stores are aligned too.

use std::fmt::Write;
use std::sync::LazyLock;

/// The kernel's entry point in [`PTX`].
pub(crate) const ENTRY: &str = "lb_push_piece";

/// Destinations one launch writes (a group of more devices takes several launches).
pub(crate) const MAX_DESTINATIONS: usize = 8;

/// Threads per block.
pub(crate) const BLOCK: u32 = 256;

/// The module: `lb_push_piece(src, bytes, destinations, d0, …, d7)`, `destinations` ≤ 8 of the
/// `d` addresses used.
pub(crate) static PTX: LazyLock<String> = LazyLock::new(ptx);

/// Whether every address in `destinations` lies at `src`'s offset modulo 16, as the kernel's
/// 16-byte stores need.
pub(crate) fn aligned_alike(src: u64, destinations: &[u64]) -> bool {
    destinations.iter().all(|&d| d % 16 == src % 16)
}

/// Blocks for a piece of `bytes`: one thread per 16 bytes, at most `max_blocks` (the grid then
/// strides).
pub(crate) fn grid(bytes: usize, max_blocks: u32) -> u32 {
    let units = (bytes / 16).max(16) as u64;
    u32::try_from(units.div_ceil(BLOCK as u64))
        .unwrap_or(u32::MAX)
        .clamp(1, max_blocks.max(1))
}

/// Stores register `value` (a `{…}` vector or a scalar) at `offset` past every destination the
/// launch uses: destination `j` (`%rd{13 + j}`) when `j` is below the count (`%r0`).
fn store_all(out: &mut String, kind: &str, offset: &str, value: &str) {
    for j in 0..MAX_DESTINATIONS {
        let _ = writeln!(out, "    setp.gt.u32 %p1, %r0, {j};");
        let _ = writeln!(out, "    add.s64 %rd10, %rd{d}, {offset};", d = 13 + j);
        let _ = writeln!(out, "    @%p1 st.global.{kind} [%rd10], {value};");
    }
}

/// The kernel's text. Registers: `%r0` the destination count, `%r1`–`%r4` the grid's
/// coordinates, `%r5`–`%r8` 16 bytes in flight, `%r9` one byte; `%rd0` the source, `%rd1` the
/// length, `%rd2` the head's bytes, `%rd3` the 16-byte units, `%rd4` where the tail starts and
/// `%rd5` its bytes, `%rd6` the thread's index, `%rd7` the grid's stride, `%rd8` the unit, `%rd9`
/// an offset in the piece, `%rd10`/`%rd11` addresses, `%rd12` scratch, `%rd13`–`%rd20` the
/// destinations.
fn ptx() -> String {
    let mut out = String::from(
        ".version 7.8\n.target sm_75\n.address_size 64\n\n.visible .entry lb_push_piece(\n    \
         .param .u64 p_src,\n    .param .u64 p_bytes,\n    .param .u32 p_n",
    );
    for j in 0..MAX_DESTINATIONS {
        let _ = write!(out, ",\n    .param .u64 p_d{j}");
    }
    out.push_str("\n)\n{\n");
    out.push_str("    .reg .pred %p<4>;\n    .reg .b32 %r<10>;\n    .reg .b64 %rd<21>;\n");
    out.push_str(
        "    ld.param.u64 %rd0, [p_src];\n    ld.param.u64 %rd1, [p_bytes];\n    \
         ld.param.u32 %r0, [p_n];\n",
    );
    for j in 0..MAX_DESTINATIONS {
        let _ = writeln!(out, "    ld.param.u64 %rd{d}, [p_d{j}];", d = 13 + j);
    }
    // head = min((16 - src % 16) % 16, bytes); units of 16 bytes after it; the tail after them.
    out.push_str(
        "    and.b64 %rd12, %rd0, 15;\n    mov.u64 %rd2, 16;\n    sub.s64 %rd2, %rd2, %rd12;\n    \
         and.b64 %rd2, %rd2, 15;\n    min.u64 %rd2, %rd2, %rd1;\n    \
         sub.s64 %rd12, %rd1, %rd2;\n    shr.u64 %rd3, %rd12, 4;\n    \
         shl.b64 %rd4, %rd3, 4;\n    add.s64 %rd4, %rd4, %rd2;\n    \
         sub.s64 %rd5, %rd1, %rd4;\n    mov.u32 %r1, %ctaid.x;\n    \
         mov.u32 %r2, %ntid.x;\n    mov.u32 %r3, %tid.x;\n    mov.u32 %r4, %nctaid.x;\n    \
         mul.wide.u32 %rd6, %r1, %r2;\n    cvt.u64.u32 %rd12, %r3;\n    add.s64 %rd6, %rd6, %rd12;\n    \
         mul.wide.u32 %rd7, %r4, %r2;\n    mov.u64 %rd8, %rd6;\nL0:\n    \
         setp.ge.u64 %p0, %rd8, %rd3;\n    @%p0 bra L1;\n    shl.b64 %rd9, %rd8, 4;\n    \
         add.s64 %rd9, %rd9, %rd2;\n    add.s64 %rd11, %rd0, %rd9;\n    \
         ld.global.nc.v4.u32 {%r5, %r6, %r7, %r8}, [%rd11];\n",
    );
    store_all(&mut out, "v4.u32", "%rd9", "{%r5, %r6, %r7, %r8}");
    out.push_str(
        "    add.s64 %rd8, %rd8, %rd7;\n    bra L0;\nL1:\n    \
         setp.ge.u64 %p2, %rd6, %rd2;\n    @%p2 bra L2;\n    add.s64 %rd11, %rd0, %rd6;\n    \
         ld.global.nc.u8 %r9, [%rd11];\n",
    );
    store_all(&mut out, "u8", "%rd6", "%r9");
    out.push_str(
        "L2:\n    setp.ge.u64 %p3, %rd6, %rd5;\n    @%p3 bra L3;\n    \
         add.s64 %rd9, %rd4, %rd6;\n    add.s64 %rd11, %rd0, %rd9;\n    \
         ld.global.nc.u8 %r9, [%rd11];\n",
    );
    store_all(&mut out, "u8", "%rd9", "%r9");
    out.push_str("L3:\n    ret;\n}\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn destinations_must_share_the_source_offset_modulo_16() {
        assert!(aligned_alike(0x1003, &[0x2003, 0x5013]));
        assert!(!aligned_alike(0x1003, &[0x2003, 0x5004]));
        assert!(aligned_alike(0x1000, &[]));
    }

    /// Pieces of every length from 0 to past a few blocks' worth, at every offset modulo 16,
    /// into 1 to 8 destinations (one left out: it is the source's own copy), on the simulator:
    /// every destination holds the piece and not a byte around it changed.
    #[test]
    fn the_kernel_copies_every_byte_of_a_piece_into_every_destination() {
        use lb_ptx::sim::{self, LaunchConfig, Memory};
        use rand::{Rng, SeedableRng};
        let module = sim::parse(&PTX).expect("the push kernel parses");
        let seed = rand::random::<u64>();
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let mut mem = Memory::new();
        let lengths = [0usize, 1, 15, 16, 17, 31, 100, 4096, 4096 * 3 + 5, 70_001];
        for (case, &len) in lengths.iter().enumerate() {
            let shift = rng.random_range(0..16u64);
            let dests = 1 + case % MAX_DESTINATIONS;
            let room = len as u64 + 64;
            let src_buf = mem.alloc(room).expect("alloc");
            let data: Vec<u8> = (0..len).map(|_| rng.random()).collect();
            let src = src_buf + 16 + shift;
            mem.write(src, &data).expect("write");
            let fill = 0xa5u8;
            let bufs: Vec<u64> = (0..dests)
                .map(|_| mem.alloc(room).expect("alloc"))
                .collect();
            for &b in &bufs {
                mem.write(b, &vec![fill; room as usize]).expect("write");
            }
            let mut args = vec![src, len as u64, dests as u64];
            args.extend(bufs.iter().map(|b| b + 16 + shift));
            args.resize(3 + MAX_DESTINATIONS, 0);
            let blocks = grid(len, 3);
            let cfg = LaunchConfig {
                grid: blocks,
                block: BLOCK,
                dynamic_shared: 0,
            };
            sim::launch(&module, ENTRY, cfg, &args, &mut mem).expect("the push kernel runs");
            for (j, &b) in bufs.iter().enumerate() {
                let got = mem.read(b, room).expect("read");
                let what = format!("seed {seed}, {len} bytes at +{shift}, destination {j}");
                assert!(
                    got[..16 + shift as usize].iter().all(|&x| x == fill),
                    "{what}: before"
                );
                assert_eq!(&got[16 + shift as usize..][..len], &data[..], "{what}");
                let after = &got[16 + shift as usize + len..];
                assert!(after.iter().all(|&x| x == fill), "{what}: after");
            }
        }
    }

    /// ptxas (when `LB_PTXAS` names it) accepts the kernel for sm_75, sm_80 and sm_90, unspilled.
    #[test]
    fn the_kernel_assembles() {
        lb_ptx::ptxas::assert_assembles("the all-gather's push kernel", &PTX);
    }

    #[test]
    fn the_grid_covers_the_piece_up_to_its_cap() {
        assert_eq!(grid(0, 132), 1);
        assert_eq!(grid(16 * 256, 132), 1);
        assert_eq!(grid(16 * 256 + 16, 132), 2);
        assert_eq!(grid(1 << 30, 132), 132);
    }
}
