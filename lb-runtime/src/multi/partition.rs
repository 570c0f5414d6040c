//! Where a tile set is cut between devices: a merge-path split of rows and atoms.
//!
//! Merrill and Garland's merge path, applied once at the level of devices instead of threads:
//! the row ends and the atoms are merged into one sequence of `rows + atoms` items, and device
//! `k` takes the items between diagonals `k·(rows + atoms)/n` and `(k + 1)·(rows + atoms)/n`.
//! Every device gets the same number of items whatever the row lengths, so one giant row is cut
//! across several devices instead of loading one, and a run of empty rows counts as work too.

use std::ops::Range;

/// One device's share of a tile set, in the tile set's own (global) numbering.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Share {
    /// The rows the share has atoms of or owns: its local row `i` is global row
    /// `rows.start + i`.
    pub rows: Range<usize>,
    /// The rows whose result this share writes: every row whose end falls in the share. The
    /// owned ranges of all shares are disjoint and cover every row.
    pub owned: Range<usize>,
    /// The atoms of the share (a contiguous range of the tile set's atoms).
    pub atoms: Range<usize>,
    /// The share that owns the share's last row when that row goes on past the share: this
    /// share's partial result for it is combined into that share's.
    pub carry_to: Option<usize>,
}

/// The point of the merged sequence at `diagonal`: `(rows consumed, atoms consumed)`, where each
/// row's end counts as `row_weight` items.
///
/// Row `i`'s end comes after its own atoms, at position `offsets[i + 1] + row_weight · i` of the
/// merged sequence; it is consumed before the diagonal when that position is below it. That
/// predicate is monotone in `i`, so a binary search finds the count. With a weight above one
/// the diagonal can fall inside a row's end; the atoms consumed are then that row's last one,
/// so the point stays on the sequence (its atoms between the row's offsets).
fn merge_point(offsets: &[usize], diagonal: u128, row_weight: usize) -> (usize, usize) {
    // u128: a row weight of any size times a row count stays exact.
    let end = |i: usize| offsets[i + 1] as u128 + row_weight as u128 * i as u128;
    let (mut lo, mut hi) = (0, offsets.len() - 1);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if end(mid) < diagonal {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    let atoms = diagonal.saturating_sub(row_weight as u128 * lo as u128);
    let row_end = offsets[(lo + 1).min(offsets.len() - 1)];
    // The clamp keeps the count within the tile set's atoms, so it fits a usize again.
    (
        lo,
        atoms.clamp(offsets[lo] as u128, row_end as u128) as usize,
    )
}

/// `n` shares of the CSR-like tile set with `offsets` (`rows + 1` nondecreasing tile offsets
/// starting at 0). A cut that falls inside a row of fewer than `min_cut_row` atoms moves to the
/// end of that row: `0` cuts anywhere, `usize::MAX` never splits a row (what a kernel whose
/// epilogue must see a row's whole result needs; shares may then be uneven, or empty), and
/// [`min_cut_row`] keeps the shares within a percent or two of even while splitting only rows
/// long enough to unbalance them.
pub fn split(offsets: &[usize], n: usize, min_cut_row: usize) -> Vec<Share> {
    split_weighted(offsets, n, min_cut_row, 1)
}

/// [`split`] with each row's end counting as `row_weight` atoms in the merged sequence: the
/// shares are even in `row_weight · rows + atoms`. One is Merrill and Garland's merge path;
/// more gives the devices with many short rows fewer atoms, for where a row costs more than an
/// atom (its result stored into every device's copy, [`Transport::PeerStores`]). Zero counts as
/// one: a row's end must take a place in the sequence, or the last row would never be consumed.
///
/// [`Transport::PeerStores`]: super::Transport::PeerStores
pub fn split_weighted(
    offsets: &[usize],
    n: usize,
    min_cut_row: usize,
    row_weight: usize,
) -> Vec<Share> {
    let row_weight = row_weight.max(1);
    let rows = offsets.len() - 1;
    let atoms = offsets[rows];
    // u128: `k · total` overflows u64 for a large row weight (or tile sets far beyond any
    // memory), and a wrong cut would be silent.
    let total = row_weight as u128 * rows as u128 + atoms as u128;
    let mut points: Vec<(usize, usize)> = (0..=n)
        .map(|k| merge_point(offsets, k as u128 * total / n as u128, row_weight))
        .collect();
    for p in &mut points {
        // A cut inside row `r` (atoms of it on both sides) moves to the row's end when the row
        // is short.
        if p.1 > offsets[p.0] && offsets[p.0 + 1] - offsets[p.0] < min_cut_row {
            *p = (p.0 + 1, offsets[p.0 + 1]);
        }
    }
    let mut shares: Vec<Share> = points
        .windows(2)
        .map(|w| {
            let ((r0, a0), (r1, a1)) = (w[0], w[1]);
            // The row in progress at the share's end has atoms here but ends later.
            let partial = a1 > offsets[r1];
            Share {
                rows: r0..r1 + usize::from(partial),
                owned: r0..r1,
                atoms: a0..a1,
                carry_to: partial.then_some(usize::MAX),
            }
        })
        .collect();
    for k in 0..shares.len() {
        if shares[k].carry_to.is_some() {
            let row = shares[k].rows.end - 1;
            let owner = (k + 1..shares.len())
                .find(|&j| shares[j].owned.contains(&row))
                .expect("every row is owned by the share where it ends");
            shares[k].carry_to = Some(owner);
        }
    }
    shares
}

/// The shortest row [`MultiCsr::upload`](super::MultiCsr::upload) cuts between `n` devices: a
/// 64th of a share's atoms. Moving a cut out of a shorter row to the row's end unbalances two
/// shares by less than that, and it saves the combination of the row's partial results (a
/// reduce between the devices after every launch).
pub fn min_cut_row(offsets: &[usize], n: usize) -> usize {
    let atoms = offsets[offsets.len() - 1];
    (atoms / n.max(1) / 64).max(1)
}

/// Share `s` (of a split of `offsets`) in `c` consecutive chunks of whole rows with about the
/// same rows plus atoms each, in the tile set's numbering; chunks without rows are left out
/// unless the share has none. A chunk's `owned` rows are its rows the share owns, and the chunk
/// that holds the share's last row carries to where the share does (`carry_to` is the share's).
/// A device runs its share as one launch per chunk, so the exchange of a finished chunk
/// overlaps the next chunk's kernels.
pub fn chunks(offsets: &[usize], s: &Share, c: usize) -> Vec<Share> {
    let local = local_offsets(offsets, s);
    let pieces: Vec<Share> = split(&local, c.max(1), usize::MAX)
        .into_iter()
        .filter(|p| !p.rows.is_empty())
        .map(|p| {
            let rows = s.rows.start + p.rows.start..s.rows.start + p.rows.end;
            Share {
                owned: rows.start.min(s.owned.end)..rows.end.min(s.owned.end),
                atoms: s.atoms.start + p.atoms.start..s.atoms.start + p.atoms.end,
                carry_to: if rows.end == s.rows.end {
                    s.carry_to
                } else {
                    None
                },
                rows,
            }
        })
        .collect();
    if pieces.is_empty() {
        vec![s.clone()]
    } else {
        pieces
    }
}

/// Share `s`'s local tile offsets: the global offsets of its rows, clamped to its atoms and
/// rebased to 0.
pub fn local_offsets(offsets: &[usize], s: &Share) -> Vec<usize> {
    (s.rows.start..=s.rows.end)
        .map(|r| offsets[r].clamp(s.atoms.start, s.atoms.end) - s.atoms.start)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offsets(lengths: &[usize]) -> Vec<usize> {
        let mut o = vec![0];
        for l in lengths {
            o.push(o.last().unwrap() + l);
        }
        o
    }

    /// The invariants every split keeps: atoms and owned rows are partitions, the local
    /// offsets cover exactly the share's atoms, and a carry goes to the row's owner.
    fn check(lengths: &[usize], n: usize, whole_rows: bool) -> Vec<Share> {
        check_weighted(lengths, n, whole_rows, 1)
    }

    fn check_weighted(lengths: &[usize], n: usize, whole_rows: bool, w: usize) -> Vec<Share> {
        let o = offsets(lengths);
        let shares = split_weighted(&o, n, if whole_rows { usize::MAX } else { 0 }, w);
        assert_eq!(shares.len(), n);
        let (mut row, mut atom) = (0, 0);
        for (k, s) in shares.iter().enumerate() {
            assert_eq!(
                (s.owned.start, s.atoms.start),
                (row, atom),
                "share {k}: {shares:?}"
            );
            (row, atom) = (s.owned.end, s.atoms.end);
            assert_eq!(s.rows.start, s.owned.start);
            let local = local_offsets(&o, s);
            assert_eq!(local.len(), s.rows.len() + 1);
            assert_eq!(local[0], 0);
            assert_eq!(*local.last().unwrap(), s.atoms.len());
            match s.carry_to {
                Some(owner) => {
                    assert_eq!(s.rows.end, s.owned.end + 1);
                    assert!(owner > k && shares[owner].owned.contains(&(s.rows.end - 1)));
                    assert!(!whole_rows, "a whole-rows split carries nothing");
                }
                None => assert_eq!(s.rows, s.owned),
            }
        }
        assert_eq!((row, atom), (lengths.len(), o[lengths.len()]));
        shares
    }

    #[test]
    fn shares_are_even_in_rows_plus_atoms() {
        let shares = check(&[3; 100], 4, false);
        for s in &shares {
            assert!(
                (s.owned.len() + s.atoms.len()).abs_diff(100) <= 3,
                "{shares:?}"
            );
        }
    }

    #[test]
    fn weighted_rows_even_out_rows_times_weight_plus_atoms() {
        // Half the atoms in 10 long rows, half in 1 000 rows of one: with rows weighing 4 the
        // device with the short rows takes fewer atoms.
        let mut lengths = vec![100; 10];
        lengths.extend([1; 1000]);
        for w in [1, 2, 4, 7] {
            let shares = check_weighted(&lengths, 2, false, w);
            let total = w * lengths.len() + 2000;
            for s in &shares {
                let items = w * s.owned.len() + s.atoms.len();
                assert!(items.abs_diff(total / 2) <= 100 + w, "w {w}: {shares:?}");
            }
        }
        let one = check_weighted(&lengths, 2, false, 1);
        let four = check_weighted(&lengths, 2, false, 4);
        assert!(four[1].atoms.len() < one[1].atoms.len(), "{one:?} {four:?}");
        assert_eq!(
            check_weighted(&lengths, 3, false, 0),
            check(&lengths, 3, false)
        );
        // A weight far above any atom count splits by rows, without overflowing.
        let by_rows = check_weighted(&lengths, 2, false, usize::MAX);
        assert!(by_rows[0].owned.len().abs_diff(505) <= 1, "{by_rows:?}");
    }

    #[test]
    fn a_giant_row_is_cut_across_devices_and_carried_to_its_owner() {
        let mut lengths = vec![1; 10];
        lengths[4] = 1000;
        let shares = check(&lengths, 4, false);
        // The row's first three quarters are carried to the share where it ends.
        let carried: Vec<_> = shares.iter().filter_map(|s| s.carry_to).collect();
        assert_eq!(carried.len(), 3, "{shares:?}");
        assert!(carried.iter().all(|&o| shares[o].owned.contains(&4)));
        for s in &shares {
            assert!(s.atoms.len() <= 260, "{shares:?}");
        }
    }

    #[test]
    fn whole_rows_keep_each_row_on_one_device() {
        let mut lengths = vec![1; 10];
        lengths[4] = 1000;
        let shares = check(&lengths, 4, true);
        assert_eq!(shares.iter().filter(|s| s.owned.contains(&4)).count(), 1);
    }

    #[test]
    fn more_devices_than_rows_and_empty_tile_sets() {
        check(&[2, 0], 4, false);
        check(&[], 3, false);
        check(&[0, 0, 0], 2, false);
        check(&[1], 4, true);
        check(&[5], 1, false);
    }

    /// Chunks of every share: whole rows, together exactly the share's atoms and owned rows,
    /// the carry on the chunk with the share's last row.
    fn check_chunks(lengths: &[usize], n: usize, c: usize) {
        let o = offsets(lengths);
        for s in check(lengths, n, false) {
            let parts = chunks(&o, &s, c);
            assert!(!parts.is_empty() && parts.len() <= c.max(1), "{parts:?}");
            let (mut row, mut atom, mut owned) = (s.rows.start, s.atoms.start, s.owned.start);
            for (i, p) in parts.iter().enumerate() {
                assert_eq!(
                    (p.rows.start, p.atoms.start),
                    (row, atom),
                    "{s:?} {parts:?}"
                );
                assert_eq!(p.owned.start, owned, "{s:?} {parts:?}");
                (row, atom, owned) = (p.rows.end, p.atoms.end, p.owned.end);
                let last = i + 1 == parts.len();
                assert_eq!(p.carry_to, if last { s.carry_to } else { None });
                // Inside the share, chunks end at row ends.
                if !last {
                    assert_eq!(o[p.rows.end].clamp(s.atoms.start, s.atoms.end), p.atoms.end);
                }
            }
            assert_eq!((row, atom, owned), (s.rows.end, s.atoms.end, s.owned.end));
        }
    }

    #[test]
    fn chunks_cut_a_share_at_row_ends() {
        let mut lengths = vec![3; 50];
        lengths[7] = 400;
        for n in 1..=4 {
            for c in [1, 2, 3, 8, 100] {
                check_chunks(&lengths, n, c);
            }
        }
        check_chunks(&[], 2, 4);
        check_chunks(&[0, 0, 0], 3, 2);
        check_chunks(&[1000], 3, 4);
    }

    #[test]
    fn short_rows_are_not_cut() {
        // Rows of 3 atoms, shares of ~100 items: a minimum of 4 keeps every row whole.
        let o = offsets(&[3; 100]);
        assert!(split(&o, 4, 4).iter().all(|s| s.carry_to.is_none()));
        assert_eq!(min_cut_row(&o, 4), 1);
        let long = offsets(&[10_000; 40]);
        assert_eq!(min_cut_row(&long, 4), 10_000 * 40 / 4 / 64);
    }

    #[test]
    fn random_lengths_keep_the_invariants() {
        // xorshift64: the crate has no random generator among its dependencies.
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = |bound: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % bound) as usize
        };
        for _ in 0..300 {
            let rows = next(40);
            // Mostly short or empty rows, one in five long.
            let lengths: Vec<usize> = (0..rows)
                .map(|_| {
                    if next(5) == 0 {
                        40 + next(240)
                    } else {
                        next(4)
                    }
                })
                .collect();
            let n = 1 + next(5);
            check(&lengths, n, false);
            check(&lengths, n, true);
            let w = 1 + next(8);
            check_weighted(&lengths, n, false, w);
            check_weighted(&lengths, n, true, w);
            check_chunks(&lengths, n, 1 + next(6));
        }
    }
}
