//! A CSR tile set split across a group of devices, its per-device outputs, and the launch that
//! combines the rows cut between devices.

use std::ops::Range;

use super::collective::{Piece, ReduceSend};
use super::partition::{self, Share};
use super::{Devices, Reduction, Replicated};
use crate::buffer::{DeviceBuffer, Element};
use crate::device::Device;
use crate::error::{Error, Result};
use crate::formats::{Csr, DeviceCsr};
use crate::launch::Launch;
use crate::stream::{Pending, Stream};

/// One device's part of a [`MultiCsr`]: a CSR of its own, numbered locally (its row `i` is the
/// tile set's row `rows().start + i`, its atoms are `atoms()` of the tile set's; column indices
/// keep the tile set's numbering, so a replicated `x` is indexed as on one device).
pub struct CsrPart<T: Element> {
    index: usize,
    share: Share,
    tiles: DeviceCsr<T>,
}

impl<T: Element> CsrPart<T> {
    /// The part's position in the group (its device's index).
    pub fn index(&self) -> usize {
        self.index
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

    /// The part whose last row goes on in a later part: that part's index, where the row's
    /// partial result from this part is combined.
    pub fn carries_to(&self) -> Option<usize> {
        self.share.carry_to
    }
}

/// A [`Csr`] split across the devices of a [`Devices`] group by a merge path over rows and atoms
/// (every part holds about `(rows + nnz) / devices` of them; a long row is cut across parts).
pub struct MultiCsr<T: Element> {
    devices: Devices,
    parts: Vec<CsrPart<T>>,
    num_rows: usize,
    num_cols: usize,
    nnz: usize,
}

/// An array with `width` elements per row of a split tile set (the lanes of SpMM, or 1), held as
/// one buffer per part with that part's local rows: a launch's output, or an input indexed by
/// row (a kernel launched for a part numbers its tiles locally).
pub struct RowParts<U: Element> {
    width: usize,
    parts: Vec<DeviceBuffer<U>>,
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

impl<T: Element> MultiCsr<T> {
    /// Splits `csr` across `devices` so that every part has about the same rows plus atoms,
    /// cutting rows where the split falls inside one.
    pub fn upload(devices: &Devices, csr: &Csr<T>) -> Result<MultiCsr<T>> {
        Self::upload_split(devices, csr, false)
    }

    /// Like [`upload`](Self::upload), but every cut moves to the end of the row it falls in: no
    /// row is split, at the price of uneven parts where rows are long. What kernels with an
    /// epilogue need.
    pub fn upload_whole_rows(devices: &Devices, csr: &Csr<T>) -> Result<MultiCsr<T>> {
        Self::upload_split(devices, csr, true)
    }

    fn upload_split(devices: &Devices, csr: &Csr<T>, whole_rows: bool) -> Result<MultiCsr<T>> {
        csr.validate()?;
        let shares = partition::split(&csr.row_offsets, devices.count(), whole_rows);
        let parts = shares
            .into_iter()
            .zip(devices.devices())
            .enumerate()
            .map(|(index, (share, dev))| {
                let local = Csr {
                    num_rows: share.rows.len(),
                    num_cols: csr.num_cols,
                    row_offsets: partition::local_offsets(&csr.row_offsets, &share),
                    col_indices: csr.col_indices[share.atoms.clone()].to_vec(),
                    values: csr.values[share.atoms.clone()].to_vec(),
                };
                Ok(CsrPart {
                    index,
                    share,
                    tiles: DeviceCsr::upload(dev, &local)?,
                })
            })
            .collect::<Result<_>>()?;
        Ok(MultiCsr {
            devices: devices.clone(),
            parts,
            num_rows: csr.num_rows,
            num_cols: csr.num_cols,
            nnz: csr.nnz(),
        })
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
        let parts = self
            .parts
            .iter()
            .map(|p| {
                let n = p.share.rows.len().checked_mul(width).ok_or_else(|| {
                    Error::Shape(format!("{} rows of {width} elements", p.share.rows.len()))
                })?;
                p.device().zeros(n)
            })
            .collect::<Result<_>>()?;
        Ok(RowParts { width, parts })
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
        Ok(RowParts { width, parts })
    }

    /// Runs a kernel on every part at once: `launch(part, stream, output)` enqueues it on
    /// `stream` (the part's device's stream) with the part's tile set, the part's copy of every
    /// replicated input, and `output`, the part's buffer of `out`; typically a generated
    /// kernel's `launch_with_async`. When every part is enqueued, the partial results of the
    /// rows cut between parts are combined with `reduction` (the kernel's `REDUCTION`) into
    /// the part that owns each row; then every part is waited for and its report returned.
    ///
    /// Each part's kernel sees the part's local numbering: `#[tile]` is the local row and
    /// `#[atom]` the local atom, so arrays they index are passed per part
    /// ([`split_rows`](Self::split_rows)); column indices keep the tile set's numbering. A
    /// kernel whose result for a row must come from one device, an epilogue or an atom's
    /// `#[rank]` ([`Reduction::whole_rows`]), needs a tile set uploaded with
    /// [`upload_whole_rows`](Self::upload_whole_rows): otherwise the error says so, before
    /// anything is launched.
    pub fn launch<U: Element>(
        &self,
        reduction: Reduction,
        out: &mut RowParts<U>,
        launch: impl FnMut(&CsrPart<T>, &Stream, &mut DeviceBuffer<U>) -> Result<Pending>,
    ) -> Result<MultiLaunch> {
        let pending = self.enqueue(reduction, out, launch)?;
        Self::wait_all(pending)
    }

    /// [`launch`](Self::launch), then [`all_gather`](Self::all_gather) of its result into
    /// `into`, with no wait between them: one iteration of an iterative method (the next one's
    /// input is `into`, which must not be an input of this launch). Each device starts its share
    /// of the exchange as soon as its own kernels are done.
    pub fn launch_and_gather<U: Element>(
        &self,
        reduction: Reduction,
        out: &mut RowParts<U>,
        into: &mut Replicated<U>,
        launch: impl FnMut(&CsrPart<T>, &Stream, &mut DeviceBuffer<U>) -> Result<Pending>,
    ) -> Result<MultiLaunch> {
        self.check_gather(out, into)?;
        let pending = self.enqueue(reduction, out, launch)?;
        if let Err(e) = self.gather_pieces(out, into) {
            let _ = Self::wait_all(pending);
            return Err(e);
        }
        Self::wait_all(pending)
    }

    /// Enqueues every part's launch and the combination of the cut rows.
    fn enqueue<U: Element>(
        &self,
        reduction: Reduction,
        out: &mut RowParts<U>,
        mut launch: impl FnMut(&CsrPart<T>, &Stream, &mut DeviceBuffer<U>) -> Result<Pending>,
    ) -> Result<Vec<Pending>> {
        self.check_outputs(out)?;
        if reduction.whole_rows && self.parts.iter().any(|p| p.carries_to().is_some()) {
            return Err(Error::Shape(
                "the kernel needs each row whole on one device (it has an epilogue or reads an \
                 atom's rank), and this split cuts a row between devices: upload the tile set \
                 with MultiCsr::upload_whole_rows"
                    .into(),
            ));
        }
        let mut pending = Vec::with_capacity(self.parts.len());
        for (part, buf) in self.parts.iter().zip(&mut out.parts) {
            let stream = part.device().stream();
            match launch(part, &stream, buf) {
                Ok(p) => pending.push(p),
                Err(e) => {
                    // Reports of the parts already enqueued are dropped with them; wait so no
                    // kernel still runs on buffers the caller may free next.
                    let _ = self.devices.synchronize();
                    return Err(e);
                }
            }
        }
        if let Err(e) = self.combine_carries(reduction, out) {
            let _ = Self::wait_all(pending);
            return Err(e);
        }
        Ok(pending)
    }

    /// Waits for every part; the first error wins, after every part was waited for.
    fn wait_all(pending: Vec<Pending>) -> Result<MultiLaunch> {
        let launches: Vec<Result<Launch>> = pending.into_iter().map(Pending::wait).collect();
        Ok(MultiLaunch {
            parts: launches.into_iter().collect::<Result<_>>()?,
        })
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
        for (p, buf) in self.parts.iter().zip(&out.parts) {
            if !p.device().same(buf.device()) {
                return Err(Error::DeviceMismatch {
                    what: format!("the output of part {}", p.index),
                });
            }
            if buf.len() != p.share.rows.len() * out.width {
                return Err(Error::Shape(format!(
                    "the output of part {} has {} elements where its {} rows of {} need {}: \
                     make the outputs with this tile set's MultiCsr::outputs",
                    p.index,
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
    fn combine_carries<U: Element>(&self, reduction: Reduction, out: &RowParts<U>) -> Result<()> {
        let width = out.width;
        let exchange = self.devices.exchange();
        for owner in 0..self.parts.len() {
            let senders: Vec<ReduceSend> = self
                .parts
                .iter()
                .zip(&out.parts)
                .map(|(p, buf)| ReduceSend {
                    addr: (p.carries_to() == Some(owner)).then(|| {
                        let last = p.share.rows.len() - 1;
                        buf.device_addr() + (last * width * U::SIZE) as u64
                    }),
                })
                .collect();
            if width == 0 || senders.iter().all(|s| s.addr.is_none()) {
                continue;
            }
            // The owner's first local row is the cut row (it started in an earlier part).
            exchange.reduce::<U>(
                self.devices.devices(),
                reduction.op,
                width,
                owner,
                out.parts[owner].device_addr(),
                &senders,
            )?;
        }
        Ok(())
    }

    /// Copies every part's owned rows of `out` into every device's copy of `into` (an
    /// all-gather of unequal pieces): the result of one iteration becomes the next one's
    /// replicated input. `into` holds `num_rows · width` elements on every device of the group.
    /// Enqueued on the devices' streams, after the work already there.
    pub fn all_gather<U: Element>(
        &self,
        out: &RowParts<U>,
        into: &mut Replicated<U>,
    ) -> Result<()> {
        self.check_gather(out, into)?;
        self.gather_pieces(out, into)
    }

    fn check_gather<U: Element>(&self, out: &RowParts<U>, into: &Replicated<U>) -> Result<()> {
        self.check_outputs(out)?;
        let need = self.num_rows * out.width;
        if into.copies.len() != self.parts.len() || into.len() != need {
            return Err(Error::Shape(format!(
                "gathering {} rows of {} into {} copies of {} elements: make it with \
                 Devices::replicated_zeros({need}) on this tile set's devices",
                self.num_rows,
                out.width,
                into.copies.len(),
                into.len()
            )));
        }
        for (dev, copy) in self.devices.devices().iter().zip(&into.copies) {
            if !dev.same(copy.device()) {
                return Err(Error::DeviceMismatch {
                    what: "a copy of the gathered array".into(),
                });
            }
        }
        Ok(())
    }

    fn gather_pieces<U: Element>(&self, out: &RowParts<U>, into: &mut Replicated<U>) -> Result<()> {
        let pieces: Vec<Piece> = self
            .parts
            .iter()
            .filter(|p| !p.share.owned.is_empty())
            .map(|p| Piece {
                root: p.index,
                src_at: 0,
                count: p.share.owned.len() * out.width,
                dst_at: p.share.owned.start * out.width,
            })
            .collect();
        let src: Vec<&DeviceBuffer<U>> = out.parts.iter().collect();
        self.devices
            .exchange()
            .broadcast(self.devices.devices(), &pieces, &src, &mut into.copies)
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
