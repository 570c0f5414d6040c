//! A CSR tile set split across a group of devices, its per-device outputs, and the launch that
//! combines the rows cut between devices and overlaps the all-gather of its result with its
//! kernels.

use std::ops::Range;
use std::sync::{Arc, Mutex};

use super::collective::{Exchange, Piece, ReduceSend};
use super::combine;
use super::partition::{self, Share};
use super::{Devices, Reduction, Replicated};
use crate::buffer::{DeviceBuffer, Element};
use crate::device::{lock, Device};
use crate::error::{Error, Result};
use crate::formats::{Csr, DeviceCsr};
use crate::launch::Launch;
use crate::stream::{Pending, Stream};
use lb_ptx::body::Reduce;

/// One chunk of one device's part of a [`MultiCsr`]: a CSR of its own, numbered locally (its
/// row `i` is the tile set's row `rows().start + i`, its atoms are `atoms()` of the tile set's;
/// column indices keep the tile set's numbering, so a replicated `x` is indexed as on one
/// device). A device's share of the tile set is one part, or several chunks of whole rows that
/// its launches run one after another (see [`SplitOptions::chunks`]).
pub struct CsrPart<T: Element> {
    index: usize,
    chunk: usize,
    share: Share,
    tiles: DeviceCsr<T>,
    /// With [`SplitOptions::local_columns_first`]: the part's atoms whose columns its device
    /// owns, and the others, each a tile set of the part's rows.
    halves: Option<Box<[CsrPart<T>; 2]>>,
}

impl<T: Element> CsrPart<T> {
    /// The index in the group of the device holding the part (what [`Replicated::on`] takes).
    pub fn index(&self) -> usize {
        self.index
    }

    /// Which chunk of its device's share the part is (0 for the first, and for an unchunked
    /// share).
    pub fn chunk(&self) -> usize {
        self.chunk
    }

    /// The device holding the part.
    pub fn device(&self) -> &Device {
        self.tiles.device()
    }

    /// The part's tile set, what a kernel launched for the part takes.
    pub fn tiles(&self) -> &DeviceCsr<T> {
        &self.tiles
    }

    /// The tile set's rows the part has atoms of or owns (its local rows, in order).
    pub fn rows(&self) -> Range<usize> {
        self.share.rows.clone()
    }

    /// The rows whose results this part writes in the assembled output.
    pub fn owned_rows(&self) -> Range<usize> {
        self.share.owned.clone()
    }

    /// The tile set's atoms the part holds.
    pub fn atoms(&self) -> Range<usize> {
        self.share.atoms.clone()
    }

    /// When the part's last row goes on in a later device's part: that part's position in
    /// [`MultiCsr::parts`], where the row's partial result from this part is combined.
    pub fn carries_to(&self) -> Option<usize> {
        self.share.carry_to
    }

    /// With [`SplitOptions::local_columns_first`], the part's atoms split by column: first
    /// those whose columns are rows its device owns (the `x` entries its device computed
    /// itself in the previous iteration), then the others. Each half is a tile set of all the
    /// part's rows; a half reports the part's [`atoms`](Self::atoms).
    pub fn column_halves(&self) -> Option<(&CsrPart<T>, &CsrPart<T>)> {
        self.halves.as_deref().map(|[own, other]| (own, other))
    }
}

/// How [`MultiCsr::upload_with`] splits a tile set.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SplitOptions {
    /// Never cut a row between devices (what kernels with an epilogue or that read `#[rank]`
    /// need). Otherwise a cut falls inside a row only when the row is long enough to unbalance
    /// the devices (a 64th of a device's atoms or more); shorter rows stay whole.
    pub whole_rows: bool,
    /// Launches per device: each device's share is cut into this many chunks of whole rows,
    /// launched one after another, and [`MultiCsr::launch_and_gather`] exchanges each chunk's
    /// rows while the next chunk computes. `None` picks from the devices and atoms per device
    /// (one chunk on one device, where there is nothing to overlap):
    /// [`MultiCsr::auto_chunks`]; one chunk with [`local_columns_first`](Self::local_columns_first),
    /// whose own-column products overlap the exchange instead (two chunks split by column
    /// cost more than they overlapped on two and four H100s, docs/multi-gpu.md).
    pub chunks: Option<usize>,
    /// Also split each part by column, into the atoms whose columns its device owns and the
    /// others ([`CsrPart::column_halves`]), for [`MultiCsr::iterate_async`]: each iteration
    /// then starts with the products over the device's own columns, which need only what the
    /// device computed itself, while the other devices' rows of `x` are still on their way,
    /// and adds the rest when they have arrived. Costs a second copy of the tile set's atoms
    /// and offsets on each device. Only square tile sets on two devices or more are split, and
    /// only the parts where the products that can start early outweigh what the split costs
    /// (a second pass over the part's rows and the combination of the two results): see
    /// [`column_halves_pay`].
    pub local_columns_first: bool,
    /// How many atoms a row's end weighs in the split: the devices get even shares of
    /// `row_weight · rows + atoms` (`None` or `Some(1)`: rows plus atoms, a merge path). A
    /// row costs a device more than its atoms where its result travels: with
    /// [`Transport::PeerStores`](super::Transport::PeerStores) every row's result is stored
    /// into every device's copy, so a device with many short rows sends the most; a weight
    /// above one gives it fewer atoms instead. On two H200s with stores, R-MAT ran fastest at
    /// one (docs/multi-gpu.md); time yours with `lb-bench --devices N --row-weight 1,2,4`.
    /// `Some(0)` counts as one.
    pub row_weight: Option<usize>,
}

/// A [`Csr`] split across the devices of a [`Devices`] group by a merge path over rows and atoms
/// (every part holds about `(rows + nnz) / devices` of them; a long row is cut across parts).
pub struct MultiCsr<T: Element> {
    devices: Devices,
    /// Per device, the stream the products over its own columns run on
    /// ([`SplitOptions::local_columns_first`]); empty without.
    early: Vec<Stream>,
    /// Device by device, each device's chunks in row order.
    parts: Vec<CsrPart<T>>,
    /// Per device, its parts' positions in `parts`.
    by_device: Vec<Vec<usize>>,
    /// Per part, whether its first row is a cut row whose partial results other parts carry
    /// to it (its final value exists only after the reduce).
    receives_carry: Vec<bool>,
    /// The tables of output mirrors of the last few `into`s, keyed by their copies' addresses,
    /// the width and the element size ([`MultiCsr::mirror_tables`]).
    mirror_tables: Mutex<Vec<MirrorTables>>,
    num_rows: usize,
    num_cols: usize,
    nnz: usize,
}

/// A key of [`MultiCsr::mirror_tables`] and its tables, one per part.
type MirrorTables = (Vec<u64>, Arc<Vec<DeviceBuffer<u64>>>);

/// How many `into`s [`MultiCsr::mirror_tables`] keeps tables for: an iterative method
/// alternates between two.
const MIRROR_TABLES_KEPT: usize = 4;

/// An array with `width` elements per row of a split tile set (the lanes of SpMM, or 1), held as
/// one buffer per part with that part's local rows: a launch's output, or an input indexed by
/// row (a kernel launched for a part numbers its tiles locally).
pub struct RowParts<U: Element> {
    width: usize,
    parts: Vec<DeviceBuffer<U>>,
    /// Per part with [`CsrPart::column_halves`], the products over its device's own columns,
    /// before they are combined with the rest into `parts` ([`MultiCsr::iterate_async`]).
    partial: Vec<Option<DeviceBuffer<U>>>,
}

impl<U: Element> RowParts<U> {
    /// Part `index`'s buffer (its local rows).
    pub fn part(&self, index: usize) -> &DeviceBuffer<U> {
        &self.parts[index]
    }

    /// Elements per row.
    pub fn width(&self) -> usize {
        self.width
    }
}

/// What a launch on every part reports: one [`Launch`] per part, in part order.
#[derive(Debug)]
pub struct MultiLaunch {
    pub parts: Vec<Launch>,
}

impl MultiLaunch {
    /// The slowest part's kernel time (CUDA events), `None` on simulators: the launch's time,
    /// since the parts run at once.
    pub fn elapsed_ms(&self) -> Option<f32> {
        self.parts
            .iter()
            .map(|l| l.elapsed_ms)
            .try_fold(0.0f32, |m, t| t.map(|t| m.max(t)))
    }
}

/// A launch on every part, enqueued and not yet waited for
/// ([`MultiCsr::launch_and_gather_async`], [`MultiCsr::launch_async`]). [`wait`](Self::wait)
/// waits for every part; dropping it unread leaves the parts' reports with their streams, whose
/// next synchronizing call returns them.
#[must_use = "a launch's errors surface when it is waited on (or at its streams' next synchronization)"]
pub struct MultiPending {
    parts: Vec<Pending>,
}

impl MultiPending {
    /// Waits for every part; the first error wins, after every part was waited for.
    pub fn wait(self) -> Result<MultiLaunch> {
        let launches: Vec<Result<Launch>> = self.parts.into_iter().map(Pending::wait).collect();
        Ok(MultiLaunch {
            parts: launches.into_iter().collect::<Result<_>>()?,
        })
    }
}

impl<T: Element> MultiCsr<T> {
    /// Splits `csr` across `devices` so that every device has about the same rows plus atoms,
    /// cutting a row between devices only where it is long enough to unbalance them, in the
    /// default number of chunks per device ([`SplitOptions::default`]).
    pub fn upload(devices: &Devices, csr: &Csr<T>) -> Result<MultiCsr<T>> {
        Self::upload_with(devices, csr, SplitOptions::default())
    }

    /// Like [`upload`](Self::upload), but every cut moves to the end of the row it falls in: no
    /// row is split, at the price of uneven parts where rows are long. What kernels with an
    /// epilogue need.
    pub fn upload_whole_rows(devices: &Devices, csr: &Csr<T>) -> Result<MultiCsr<T>> {
        let options = SplitOptions {
            whole_rows: true,
            ..SplitOptions::default()
        };
        Self::upload_with(devices, csr, options)
    }

    /// The chunks per device [`upload`](Self::upload) picks for `atoms` atoms on `devices`
    /// devices: two on three devices or more when each holds at least
    /// [`CHUNK_ATOMS`](Self::CHUNK_ATOMS) atoms, else one. Measured on four and two H100s
    /// (docs/multi-gpu.md): a second chunk costs each device 5–25 µs of launch and tail, which
    /// the overlap repays where the exchange is a large part of an iteration (four devices),
    /// not on two; more chunks cost more than they overlap.
    pub fn auto_chunks(atoms: usize, devices: usize) -> usize {
        if devices >= 3 && atoms / devices >= Self::CHUNK_ATOMS {
            2
        } else {
            1
        }
    }

    /// The fewest atoms per device for which [`auto_chunks`](Self::auto_chunks) cuts chunks.
    pub const CHUNK_ATOMS: usize = 1 << 20;

    /// Splits `csr` across `devices` as `options` say.
    pub fn upload_with(
        devices: &Devices,
        csr: &Csr<T>,
        options: SplitOptions,
    ) -> Result<MultiCsr<T>> {
        csr.validate()?;
        let n = devices.count();
        let chunks = match options.chunks {
            Some(0) => {
                return Err(Error::Shape(
                    "a device's share needs at least one chunk: pass chunks: Some(1) or more, \
                     or None to let the split choose"
                        .into(),
                ))
            }
            Some(c) => c,
            None if options.local_columns_first => 1,
            None => Self::auto_chunks(csr.nnz(), n),
        };
        let min_cut = if options.whole_rows {
            usize::MAX
        } else {
            partition::min_cut_row(&csr.row_offsets, n)
        };
        let weight = options.row_weight.unwrap_or(1);
        let shares = partition::split_weighted(&csr.row_offsets, n, min_cut, weight);
        // Each device's chunks; a share's carry names a device until it is mapped to the
        // owner's first part below.
        let mut pieces: Vec<(usize, usize, Share)> = Vec::new();
        let mut by_device = vec![Vec::new(); n];
        let mut first_of = Vec::with_capacity(n);
        for (d, share) in shares.iter().enumerate() {
            first_of.push(pieces.len());
            for (c, chunk) in partition::chunks(&csr.row_offsets, share, chunks)
                .into_iter()
                .enumerate()
            {
                by_device[d].push(pieces.len());
                pieces.push((d, c, chunk));
            }
        }
        let mut receives_carry = vec![false; pieces.len()];
        for (_, _, share) in &mut pieces {
            if let Some(owner) = share.carry_to {
                share.carry_to = Some(first_of[owner]);
                receives_carry[first_of[owner]] = true;
            }
        }
        let own_columns = (options.local_columns_first && n >= 2 && csr.num_rows == csr.num_cols)
            .then(|| own_columns(&pieces, &by_device, &receives_carry));
        let parts: Vec<CsrPart<T>> = pieces
            .into_iter()
            .map(|(index, chunk, share)| {
                let row_offsets = partition::local_offsets(&csr.row_offsets, &share);
                let col_indices = &csr.col_indices[share.atoms.clone()];
                let values = &csr.values[share.atoms.clone()];
                let device = &devices.devices()[index];
                let rows = PartRows {
                    num_cols: csr.num_cols,
                    row_offsets: &row_offsets,
                    col_indices,
                    values,
                };
                let halves = match &own_columns {
                    Some(own) => column_halves(&rows, &own[index], csr.num_rows)
                        .map(|[mine, others]| -> Result<Box<[CsrPart<T>; 2]>> {
                            let half = |tiles: &Csr<T>| -> Result<CsrPart<T>> {
                                Ok(CsrPart {
                                    index,
                                    chunk,
                                    share: share.clone(),
                                    tiles: DeviceCsr::upload(device, tiles)?,
                                    halves: None,
                                })
                            };
                            Ok(Box::new([half(&mine)?, half(&others)?]))
                        })
                        .transpose()?,
                    None => None,
                };
                Ok(CsrPart {
                    index,
                    chunk,
                    tiles: DeviceCsr::upload_slices(
                        device,
                        (share.rows.len(), csr.num_cols),
                        &row_offsets,
                        col_indices,
                        values,
                    )?,
                    share,
                    halves,
                })
            })
            .collect::<Result<_>>()?;
        let early = if parts.iter().any(|p| p.halves.is_some()) {
            devices
                .devices()
                .iter()
                .map(|d| {
                    let s = d.new_stream()?;
                    // SAFETY: `iterate_async` makes the stream wait, before its first launch of
                    // each call, for the device's stream, and before each later one for what
                    // the launch reads and writes: the device's own rows of `x`, copied on its
                    // side stream (`Exchange::mark_own_rows`), and its kernels of the
                    // iteration before, which last read the partial results it writes.
                    unsafe { s.order_manually() };
                    Ok(s)
                })
                .collect::<Result<_>>()?
        } else {
            Vec::new()
        };
        Ok(MultiCsr {
            devices: devices.clone(),
            early,
            parts,
            by_device,
            receives_carry,
            mirror_tables: Mutex::new(Vec::new()),
            num_rows: csr.num_rows,
            num_cols: csr.num_cols,
            nnz: csr.nnz(),
        })
    }

    /// Chunks per device (the most any device has).
    pub fn chunks(&self) -> usize {
        self.by_device.iter().map(Vec::len).max().unwrap_or(0)
    }

    pub fn parts(&self) -> &[CsrPart<T>] {
        &self.parts
    }

    pub fn devices(&self) -> &Devices {
        &self.devices
    }

    pub fn num_rows(&self) -> usize {
        self.num_rows
    }

    pub fn num_cols(&self) -> usize {
        self.num_cols
    }

    pub fn nnz(&self) -> usize {
        self.nnz
    }

    /// Zeroed per-part rows with `width` elements per row: a launch's output.
    pub fn outputs<U: Element>(&self, width: usize) -> Result<RowParts<U>> {
        let mut parts = Vec::with_capacity(self.parts.len());
        let mut partial = Vec::with_capacity(self.parts.len());
        for p in &self.parts {
            let n = p.share.rows.len().checked_mul(width).ok_or_else(|| {
                Error::Shape(format!("{} rows of {width} elements", p.share.rows.len()))
            })?;
            parts.push(p.device().zeros(n)?);
            partial.push(match p.halves {
                Some(_) => Some(p.device().zeros(n)?),
                None => None,
            });
        }
        Ok(RowParts {
            width,
            parts,
            partial,
        })
    }

    /// `host` (`num_rows · width` elements, row-major) split into the parts' rows: an input
    /// indexed by row, or the old values of an output whose epilogue reads them. A row cut
    /// between parts is copied to each.
    pub fn split_rows<U: Element>(&self, host: &[U], width: usize) -> Result<RowParts<U>> {
        if Some(host.len()) != self.num_rows.checked_mul(width) {
            return Err(Error::Shape(format!(
                "{} elements split into {} rows of {width}: pass num_rows · width",
                host.len(),
                self.num_rows
            )));
        }
        let parts = self
            .parts
            .iter()
            .map(|p| {
                let rows = p.share.rows.clone();
                p.device()
                    .upload(&host[rows.start * width..rows.end * width])
            })
            .collect::<Result<_>>()?;
        Ok(RowParts {
            width,
            partial: self.parts.iter().map(|_| None).collect(),
            parts,
        })
    }

    /// Runs a kernel on every part at once: `launch(part, stream, output)` enqueues it on
    /// `stream` (the part's device's stream) with the part's tile set, the part's device's copy
    /// of every replicated input (`x.on(part.index())`), and `output`, the part's buffer of
    /// `out`; typically a generated kernel's `launch_with_async`. A device with several chunks
    /// gets one call per chunk, in row order. When every part is enqueued, the partial results
    /// of the rows cut between devices are combined with `reduction` (the kernel's
    /// `REDUCTION`) into the part that owns each row; then every part is waited for and its
    /// report returned.
    ///
    /// Each part's kernel sees the part's local numbering: `#[tile]` is the local row and
    /// `#[atom]` the local atom, so arrays they index are passed per part
    /// ([`split_rows`](Self::split_rows)); column indices keep the tile set's numbering. A
    /// kernel whose result for a row must come from one device, an epilogue or an atom's
    /// `#[rank]` ([`Reduction::whole_rows`]), needs a tile set uploaded with
    /// [`upload_whole_rows`](Self::upload_whole_rows): otherwise the error says so, before
    /// anything is launched. `launch` must not start exchanges of the same group (the group
    /// runs one at a time, and this one is under way).
    pub fn launch<U: Element>(
        &self,
        reduction: Reduction,
        out: &mut RowParts<U>,
        launch: impl FnMut(&CsrPart<T>, &Stream, &mut DeviceBuffer<U>) -> Result<Pending>,
    ) -> Result<MultiLaunch> {
        self.launch_async(reduction, out, launch)?.wait()
    }

    /// [`launch`](Self::launch) without the wait: returns once every part's kernels and the
    /// combination of the cut rows are enqueued. The kernels write `out` after the return: keep
    /// it (and every input of the launch) for the kernels, and wait for the result before
    /// reading it on the host. Work enqueued next on the devices' streams follows the launch; a
    /// buffer dropped meanwhile is freed after it.
    pub fn launch_async<U: Element>(
        &self,
        reduction: Reduction,
        out: &mut RowParts<U>,
        launch: impl FnMut(&CsrPart<T>, &Stream, &mut DeviceBuffer<U>) -> Result<Pending>,
    ) -> Result<MultiPending> {
        self.check_outputs(out)?;
        let parts = self.enqueue(reduction, out, None, Steps::default(), launch)?;
        Ok(MultiPending { parts })
    }

    /// [`launch`](Self::launch), then [`all_gather`](Self::all_gather) of its result into
    /// `into`, with no wait between them: one iteration of an iterative method (the next one's
    /// input is `into`, which must not be an input of this launch). Each chunk's rows are
    /// exchanged as soon as its kernels are done, while the device computes its next chunk;
    /// a row cut between devices follows once its partial results are combined.
    pub fn launch_and_gather<U: Element>(
        &self,
        reduction: Reduction,
        out: &mut RowParts<U>,
        into: &mut Replicated<U>,
        launch: impl FnMut(&CsrPart<T>, &Stream, &mut DeviceBuffer<U>) -> Result<Pending>,
    ) -> Result<MultiLaunch> {
        self.launch_and_gather_async(reduction, out, into, launch)?
            .wait()
    }

    /// [`launch_and_gather`](Self::launch_and_gather) without the wait: an iterative method
    /// enqueues its iterations back to back (each one's `into` the next one's input), and the
    /// host's work for the next iteration overlaps the devices' work on this one. As for
    /// [`launch_async`](Self::launch_async), `out`, `into` and the inputs are written or read
    /// after the return.
    pub fn launch_and_gather_async<U: Element>(
        &self,
        reduction: Reduction,
        out: &mut RowParts<U>,
        into: &mut Replicated<U>,
        launch: impl FnMut(&CsrPart<T>, &Stream, &mut DeviceBuffer<U>) -> Result<Pending>,
    ) -> Result<MultiPending> {
        self.check_gather(out, into)?;
        let parts = self.enqueue(reduction, out, Some(into), Steps::default(), launch)?;
        Ok(MultiPending { parts })
    }

    /// `iterations` steps of an iterative method `x ← f(A, x)` enqueued back to back, each
    /// one [`launch_and_gather_async`](Self::launch_and_gather_async) with the last one's
    /// gathered result as its input: `launch(part, stream, x, output)` enqueues the kernel on
    /// `stream` with `x`, the part's device's copy of the current input. The steps alternate
    /// between `x` and `spare`; when the call returns `x` is the array the last step gathers
    /// into (swapped with `spare` if need be), written after the return as with
    /// `launch_and_gather_async`. The returned reports hold every step's parts in order.
    ///
    /// On a tile set uploaded with [`SplitOptions::local_columns_first`], each step from the
    /// second on starts a device's products over the columns it owns, on a stream of their own,
    /// as soon as its own rows of `x` are there, while the other devices' rows are still being
    /// copied in; the rest of the products follow once they are. This needs the kernel to read
    /// `x` only at its atoms' columns (`x[col]`, or `x[col · width + lane]` with lanes), as
    /// SpMV, SpMM and PageRank's bodies do: a read elsewhere could see the step before's
    /// value. Kernels with [`Reduction::whole_rows`], `PeerStores` (whose kernels store into
    /// every copy themselves), 16-bit outputs and a single device run every part whole.
    pub fn iterate_async<U: Element>(
        &self,
        reduction: Reduction,
        iterations: usize,
        x: &mut Replicated<U>,
        spare: &mut Replicated<U>,
        out: &mut RowParts<U>,
        mut launch: impl FnMut(
            &CsrPart<T>,
            &Stream,
            &DeviceBuffer<U>,
            &mut DeviceBuffer<U>,
        ) -> Result<Pending>,
    ) -> Result<MultiPending> {
        if self.num_rows != self.num_cols {
            return Err(Error::Shape(format!(
                "iterating x ← f(A, x) needs a square tile set, and this one has {} rows and {} \
                 columns: launch and gather each step with launch_and_gather_async",
                self.num_rows, self.num_cols
            )));
        }
        self.check_gather(out, x)?;
        self.check_gather(out, spare)?;
        let devices = self.devices.devices();
        let halves = !self.early.is_empty()
            && !reduction.whole_rows
            && combine::entry(U::TY, reduction.op).is_some()
            && !self.devices.exchange().stores_in_kernels(devices);
        let mut parts = Vec::new();
        for step in 0..iterations {
            let own = if halves {
                self.launch_own_columns(step > 0, x, out, &mut launch)
            } else {
                Ok(Vec::new())
            };
            let own = match own {
                Ok(own) => own,
                Err(e) => {
                    let _ = self.devices.synchronize();
                    return Err(e);
                }
            };
            parts.extend(own);
            let input: &Replicated<U> = x;
            // Every step but the last leaves the copies to the peers running into the next
            // one; the last waits for them, so that the arrays may be dropped after it.
            let steps = Steps {
                halves,
                pipelined: step + 1 < iterations,
                after_barrier: step > 0,
            };
            let rest = self.enqueue(reduction, out, Some(spare), steps, |p, s, y| {
                launch(p, s, input.on(p.index()), y)
            })?;
            parts.extend(rest);
            std::mem::swap(x, spare);
        }
        Ok(MultiPending { parts })
    }

    /// Launches every split part's half in its device's own columns on the device's early
    /// stream, into `out.partial`. After the first step (`after_first`), the stream waits for
    /// the device's own rows of the step before and its kernels
    /// ([`Exchange::mark_own_rows`]), not for the other devices' copies; on the first it
    /// waits for everything on the device's stream.
    fn launch_own_columns<U: Element>(
        &self,
        after_first: bool,
        x: &Replicated<U>,
        out: &mut RowParts<U>,
        launch: &mut impl FnMut(
            &CsrPart<T>,
            &Stream,
            &DeviceBuffer<U>,
            &mut DeviceBuffer<U>,
        ) -> Result<Pending>,
    ) -> Result<Vec<Pending>> {
        let devices = self.devices.devices();
        let mut launched = Vec::new();
        for (d, parts) in self.by_device.iter().enumerate() {
            let early = &self.early[d];
            let mut waited = false;
            for &q in parts {
                let Some((own, _)) = self.parts[q].column_halves() else {
                    continue;
                };
                if !waited {
                    if after_first {
                        self.devices.exchange().wait_own_rows(d, early)?;
                    } else {
                        early.wait_for(&devices[d].stream())?;
                    }
                    waited = true;
                }
                let Some(partial) = out.partial[q].as_mut() else {
                    return Err(outputs_of_another_split(q));
                };
                let pending = launch(own, early, x.on(d), partial)?;
                same_stream(&pending, early)?;
                launched.push(pending);
            }
        }
        Ok(launched)
    }

    /// Enqueues every part's launch, chunk step by chunk step, the exchange of each step's
    /// rows when `into` is given, and the combination of the cut rows. On an error, what was
    /// enqueued is waited for (so no kernel still runs on buffers the caller may free next) and
    /// the error returned.
    fn enqueue<U: Element>(
        &self,
        reduction: Reduction,
        out: &mut RowParts<U>,
        mut into: Option<&mut Replicated<U>>,
        Steps {
            halves,
            pipelined,
            after_barrier,
        }: Steps,
        mut launch: impl FnMut(&CsrPart<T>, &Stream, &mut DeviceBuffer<U>) -> Result<Pending>,
    ) -> Result<Vec<Pending>> {
        if reduction.whole_rows && self.parts.iter().any(|p| p.carries_to().is_some()) {
            return Err(Error::Shape(
                "the kernel needs each row whole on one device (it has an epilogue or reads an \
                 atom's rank), and this split cuts a row between devices: upload the tile set \
                 with MultiCsr::upload_whole_rows"
                    .into(),
            ));
        }
        let devices = self.devices.devices();
        let carries = self.receives_carry.iter().any(|&r| r);
        let mut exchange = self.devices.exchange();
        // With the kernels storing into every copy themselves, only cut rows are gathered after.
        let tables = match into.as_deref() {
            Some(into) if exchange.stores_in_kernels(devices) => {
                Some(self.mirror_tables(into, out.width)?)
            }
            _ => None,
        };
        let stores = tables.is_some();
        let side = carries || (into.is_some() && !stores);
        let last_steps: Vec<Option<usize>> = self
            .by_device
            .iter()
            .map(|p| p.len().checked_sub(1))
            .collect();
        let mut pending = Vec::with_capacity(self.parts.len());
        let mut steps = || -> Result<()> {
            if side || (stores && !after_barrier) {
                exchange.begin(devices, stores && !after_barrier, side)?;
            }
            for step in 0..self.chunks() {
                for (d, parts) in self.by_device.iter().enumerate() {
                    let Some(&q) = parts.get(step) else { continue };
                    let stream = devices[d].stream();
                    let mirrors = tables.as_ref().map(|t| &t[q]);
                    let combine = halves.then_some(reduction.op);
                    pending.push(self.launch_part(
                        q,
                        &stream,
                        (mirrors, combine),
                        out,
                        &mut launch,
                    )?);
                    if side || stores {
                        exchange.after_compute(devices, (d, step), side)?;
                    }
                }
                match into.as_deref_mut() {
                    Some(into) if !stores => {
                        let pieces = self.step_pieces(step, out);
                        let copies = &mut into.copies;
                        exchange.gather(devices, Some(step), &pieces, copies, pipelined)?;
                    }
                    _ => {}
                }
            }
            if halves {
                exchange.mark_own_rows(devices)?;
            }
            if carries {
                self.combine_carries(&mut exchange, reduction, out)?;
                if let Some(into) = into.as_deref_mut() {
                    exchange.fence()?;
                    let pieces = self.cut_row_pieces(out);
                    exchange.gather(devices, None, &pieces, &mut into.copies, pipelined)?;
                }
            }
            if side || stores {
                exchange.end(devices, side, stores.then_some(&last_steps[..]), pipelined)?;
            }
            Ok(())
        };
        match steps() {
            Ok(()) => Ok(pending),
            Err(e) => {
                if side || stores {
                    let _ = exchange.end(devices, side, None, false);
                }
                drop(exchange);
                let _ = self.devices.synchronize();
                drop(pending);
                Err(e)
            }
        }
    }

    /// Part `q`'s launch on `stream`, its kernels storing their results into `mirrors` too
    /// when given (every device's copy of the gathered result, at the part's first row). With
    /// `combine` (never with mirrors), a part split by column launches its half in other
    /// devices' columns and combines the result with its partial one (`out.partial`).
    fn launch_part<U: Element>(
        &self,
        q: usize,
        stream: &Stream,
        (mirrors, combine): (Option<&DeviceBuffer<u64>>, Option<Reduce>),
        out: &mut RowParts<U>,
        launch: &mut impl FnMut(&CsrPart<T>, &Stream, &mut DeviceBuffer<U>) -> Result<Pending>,
    ) -> Result<Pending> {
        if let (Some(op), Some((_, others))) = (combine, self.parts[q].column_halves()) {
            let launched = launch(others, stream, &mut out.parts[q])?;
            same_stream(&launched, stream)?;
            let Some(partial) = &out.partial[q] else {
                return Err(outputs_of_another_split(q));
            };
            combine::combine_into(stream, op, &mut out.parts[q], partial)?;
            return Ok(launched);
        }
        let Some(table) = mirrors else {
            return launch(&self.parts[q], stream, &mut out.parts[q]);
        };
        // SAFETY: the table (made by `mirror_tables` for the `into` of this launch, which the
        // caller holds `&mut` for the whole launch, and checked by `check_gather` to hold
        // `num_rows · width` elements on every device) lists every device's copy at this part's
        // first row: the part's `rows.len() · width` output elements fit in each. The copies
        // of other GPUs are writable from this one: the group opened every memory pool to
        // every peer (stores are chosen only with peer access). The table lives in the cache
        // of `self`, which outlives the launch; the mirrors are turned off below before
        // anything else launches on this stream from here.
        unsafe { stream.set_output_mirrors(Some(table)) }?;
        let launched = launch(&self.parts[q], stream, &mut out.parts[q]);
        // SAFETY: turning the mirrors off asks nothing.
        unsafe { stream.set_output_mirrors(None) }?;
        let launched = launched?;
        same_stream(&launched, stream)?;
        Ok(launched)
    }

    /// Per part, on its device, the table of the addresses where its output's first element
    /// goes in each device's copy of `into` ([`Stream::set_output_mirrors`]). Cached by the
    /// copies' addresses (an iterative method alternates between two `into`s); the table
    /// follows from the addresses alone, so a buffer freed and another allocated at the same
    /// place still gets the right one.
    fn mirror_tables<U: Element>(
        &self,
        into: &Replicated<U>,
        width: usize,
    ) -> Result<Arc<Vec<DeviceBuffer<u64>>>> {
        let key: Vec<u64> = into
            .copies
            .iter()
            .map(|c| c.device_addr())
            .chain([width as u64, U::SIZE as u64])
            .collect();
        let mut cache = lock(&self.mirror_tables);
        if let Some((_, tables)) = cache.iter().find(|(k, _)| *k == key) {
            return Ok(tables.clone());
        }
        let tables = self
            .parts
            .iter()
            .map(|p| {
                let first = (p.share.rows.start * width * U::SIZE) as u64;
                let entries: Vec<u64> = into
                    .copies
                    .iter()
                    .map(|c| c.device_addr() + first)
                    .collect();
                p.device().upload(&entries)
            })
            .collect::<Result<Vec<_>>>()?;
        let tables = Arc::new(tables);
        if cache.len() >= MIRROR_TABLES_KEPT {
            cache.remove(0);
        }
        cache.push((key, tables.clone()));
        Ok(tables)
    }

    fn check_outputs<U: Element>(&self, out: &RowParts<U>) -> Result<()> {
        if out.parts.len() != self.parts.len() {
            return Err(Error::Shape(format!(
                "outputs for {} parts on a tile set of {}: make them with this tile set's \
                 MultiCsr::outputs",
                out.parts.len(),
                self.parts.len()
            )));
        }
        for (q, (p, buf)) in self.parts.iter().zip(&out.parts).enumerate() {
            if !p.device().same(buf.device()) {
                return Err(Error::DeviceMismatch {
                    what: format!("the output of part {q}"),
                });
            }
            if buf.len() != p.share.rows.len() * out.width {
                return Err(Error::Shape(format!(
                    "the output of part {q} has {} elements where its {} rows of {} need {}: \
                     make the outputs with this tile set's MultiCsr::outputs",
                    buf.len(),
                    p.share.rows.len(),
                    out.width,
                    p.share.rows.len() * out.width
                )));
            }
        }
        Ok(())
    }

    /// Combines each cut row's partial results into its owner's first row, one reduce per
    /// owner.
    fn combine_carries<U: Element>(
        &self,
        exchange: &mut Exchange,
        reduction: Reduction,
        out: &RowParts<U>,
    ) -> Result<()> {
        let width = out.width;
        if width == 0 {
            return Ok(());
        }
        for (owner, _) in self.receives_carry.iter().enumerate().filter(|(_, &r)| r) {
            // One sender per device at most: only a device's last chunk carries.
            let mut senders: Vec<ReduceSend> = (0..self.devices.count())
                .map(|_| ReduceSend { addr: None })
                .collect();
            for (p, buf) in self.parts.iter().zip(&out.parts) {
                if p.carries_to() == Some(owner) {
                    let last = p.share.rows.len() - 1;
                    senders[p.index].addr =
                        Some(buf.device_addr() + (last * width * U::SIZE) as u64);
                }
            }
            // The owner's first local row is the cut row (it started in an earlier part).
            exchange.reduce::<U>(
                self.devices.devices(),
                reduction.op,
                width,
                self.parts[owner].index,
                out.parts[owner].device_addr(),
                &senders,
            )?;
        }
        Ok(())
    }

    /// The pieces chunk step `step` gathers: each device's chunk of that step, its owned rows
    /// less a first row that still waits for carried partial results.
    fn step_pieces<U: Element>(&self, step: usize, out: &RowParts<U>) -> Vec<Piece> {
        let w = out.width;
        self.by_device
            .iter()
            .filter_map(|parts| parts.get(step))
            .map(|&q| {
                let p = &self.parts[q];
                let lead = usize::from(self.receives_carry[q]).min(p.share.owned.len());
                Piece {
                    root: p.index,
                    src: out.parts[q].device_addr() + (lead * w * U::SIZE) as u64,
                    count: (p.share.owned.len() - lead) * w,
                    dst_at: (p.share.owned.start + lead) * w,
                }
            })
            .collect()
    }

    /// The rows cut between devices, once their partial results are combined.
    fn cut_row_pieces<U: Element>(&self, out: &RowParts<U>) -> Vec<Piece> {
        let w = out.width;
        (0..self.parts.len())
            .filter(|&q| self.receives_carry[q])
            .map(|q| Piece {
                root: self.parts[q].index,
                src: out.parts[q].device_addr(),
                count: w,
                dst_at: self.parts[q].share.owned.start * w,
            })
            .collect()
    }

    /// Copies every part's owned rows of `out` into every device's copy of `into` (an
    /// all-gather of unequal pieces): the result of one iteration becomes the next one's
    /// replicated input. `into` holds `num_rows · width` elements on every device of the group.
    /// Enqueued after the work already on the devices' streams, which wait for it.
    pub fn all_gather<U: Element>(
        &self,
        out: &RowParts<U>,
        into: &mut Replicated<U>,
    ) -> Result<()> {
        self.check_gather(out, into)?;
        let devices = self.devices.devices();
        let w = out.width;
        let pieces: Vec<Piece> = self
            .parts
            .iter()
            .zip(&out.parts)
            .map(|(p, buf)| Piece {
                root: p.index,
                src: buf.device_addr(),
                count: p.share.owned.len() * w,
                dst_at: p.share.owned.start * w,
            })
            .collect();
        let mut exchange = self.devices.exchange();
        // `begin` also orders every device's copies after what every other device enqueued.
        let gathered = exchange
            .begin(devices, false, true)
            .and_then(|()| exchange.gather(devices, None, &pieces, &mut into.copies, false));
        let ended = exchange.end(devices, true, None, false);
        gathered.and(ended)
    }

    fn check_gather<U: Element>(&self, out: &RowParts<U>, into: &Replicated<U>) -> Result<()> {
        self.check_outputs(out)?;
        let need = self.num_rows * out.width;
        if into.copies.len() != self.devices.count() || into.len() != need {
            return Err(Error::Shape(format!(
                "gathering {} rows of {} into {} copies of {} elements: make it with \
                 Devices::replicated_zeros({need}) on this tile set's devices",
                self.num_rows,
                out.width,
                into.copies.len(),
                into.len()
            )));
        }
        self.devices
            .check_replicated(into, "the copies of the gathered array")
    }

    /// The assembled output on the host: every part's owned rows, in row order.
    pub fn download<U: Element>(&self, out: &RowParts<U>) -> Result<Vec<U>> {
        self.check_outputs(out)?;
        let mut all = Vec::with_capacity(self.num_rows * out.width);
        for (p, buf) in self.parts.iter().zip(&out.parts) {
            let local = buf.download()?;
            all.extend_from_slice(&local[..p.share.owned.len() * out.width]);
        }
        Ok(all)
    }
}

/// Per device, the columns whose `x` entries it computes itself: the rows its parts own, less a
/// first row cut from an earlier device (its value exists only after the partial results of the
/// devices are combined, which travel with the other devices' pieces).
fn own_columns(
    pieces: &[(usize, usize, Share)],
    by_device: &[Vec<usize>],
    receives_carry: &[bool],
) -> Vec<Range<usize>> {
    by_device
        .iter()
        .map(|parts| {
            let (Some(&first), Some(&last)) = (parts.first(), parts.last()) else {
                return 0..0;
            };
            let (start, end) = (pieces[first].2.owned.start, pieces[last].2.owned.end);
            let start = (start + usize::from(receives_carry[first])).min(end);
            start..end
        })
        .collect()
}

/// Device memory a product over one atom moves, in bytes (its column index, its value, its
/// entry of `x`): what [`column_halves_pay`] counts the early products in.
const ATOM_BYTES: f64 = 12.0;

/// Device memory a part split by column moves in addition, per row, in bytes: the second half's
/// row offset and result, and the combination of the two results (two reads and a write).
const ROW_BYTES: f64 = 24.0;

/// Bytes of device memory moved in the time one byte of the all-gather reaches a device: about
/// 3 TB/s of HBM3 against the 95–140 GB/s the copy engines moved per direction between two
/// H100s with NVLink (docs/multi-gpu.md).
const LINK_TO_MEMORY: f64 = 20.0;

/// Whether splitting a part by column pays: the products over its device's own columns (`own`
/// atoms) can only hide the time the other devices' rows of `x` take to arrive (`incoming`
/// rows, one 4-byte element each), and the split costs a second pass over the part's `rows`
/// and the combination of their two results. Each is counted in bytes of device memory: 12 per
/// own atom, 24 per row, and 20 per byte that crosses a link (HBM3's 3 TB/s against the copy
/// engines' 95–140 GB/s per direction between two H100s). On R-MAT, whose merge-path split gives
/// the last devices most of the rows and few atoms per row, it splits the first devices, which
/// receive the most, and not the last ones, for which the second pass would cost more than
/// their short wait.
pub fn column_halves_pay(own: usize, rows: usize, incoming: usize) -> bool {
    let hidden = (own as f64 * ATOM_BYTES).min(incoming as f64 * 4.0 * LINK_TO_MEMORY);
    own > 0 && hidden > rows as f64 * ROW_BYTES
}

/// A part's rows, borrowed: offsets from zero into its own stretch of the whole matrix's column
/// indices and values.
struct PartRows<'a, T> {
    num_cols: usize,
    row_offsets: &'a [usize],
    col_indices: &'a [u32],
    values: &'a [T],
}

/// `part` split into its atoms whose columns lie in `own` and the others, each a CSR of all the
/// part's rows, where [`column_halves_pay`] says so (the tile set has `num_rows` rows, those
/// outside `own` arriving from other devices).
fn column_halves<T: Element>(
    part: &PartRows<'_, T>,
    own: &Range<usize>,
    num_rows: usize,
) -> Option<[Csr<T>; 2]> {
    let is_own = |c: u32| own.contains(&(c as usize));
    let rows = part.row_offsets.len() - 1;
    let mine = part.col_indices.iter().filter(|&&c| is_own(c)).count();
    if !column_halves_pay(mine, rows, num_rows - own.len()) {
        return None;
    }
    let half = |keep: bool| {
        let mut out = Csr {
            num_rows: rows,
            num_cols: part.num_cols,
            row_offsets: Vec::with_capacity(rows + 1),
            col_indices: Vec::new(),
            values: Vec::new(),
        };
        out.row_offsets.push(0);
        for ends in part.row_offsets.windows(2) {
            for nz in ends[0]..ends[1] {
                if is_own(part.col_indices[nz]) == keep {
                    out.col_indices.push(part.col_indices[nz]);
                    out.values.push(part.values[nz]);
                }
            }
            out.row_offsets.push(out.col_indices.len());
        }
        out
    };
    Some([half(true), half(false)])
}

/// How [`MultiCsr::enqueue`] runs a step of [`MultiCsr::iterate_async`] (both off for a lone
/// launch).
#[derive(Clone, Copy, Default)]
struct Steps {
    /// A part split by column ([`CsrPart::column_halves`]) launches only its atoms in other
    /// devices' columns, and combines their results with the products over its own columns,
    /// launched before into `out.partial`; each device's own rows are then marked for the
    /// next step's products over them ([`Exchange::mark_own_rows`]).
    halves: bool,
    /// A later step follows before anything else: a device's stream waits only for the copies
    /// into its own copy of the gathered array, and its copies to its peers run on into the
    /// next step ([`Exchange::end`]).
    pipelined: bool,
    /// The step before ended in this call, with nothing enqueued since: with the kernels
    /// storing into every copy, its end made every device's stream wait for every device's
    /// kernels and exchanges, which is all that the stores' wait at the start of this step
    /// would add (a second wait across devices, on the critical path of every step).
    after_barrier: bool,
}

/// A part's kernel must run on the stream its launch closure was given: what follows it there
/// (the gathered copies, the combination of its halves) is ordered by that stream alone.
fn same_stream(launched: &Pending, stream: &Stream) -> Result<()> {
    if launched.stream().same(stream) {
        return Ok(());
    }
    Err(Error::Shape(
        "a part's kernel was launched on another stream than the one passed to the launch \
         closure: what follows it on that stream would not wait for it"
            .into(),
    ))
}

fn outputs_of_another_split(q: usize) -> Error {
    Error::Shape(format!(
        "part {q} is split by column and its outputs have no buffer for the partial products: \
         make the outputs with this tile set's MultiCsr::outputs"
    ))
}
