//! The all-gathers of unequal pieces: every device's pushed queue items, or the prefix of a
//! buffer, delivered to every device; the exchange of the vertices each device claimed in a
//! step of a search across devices, and of the values that go with them.

use super::collective::Piece;
use super::{Devices, Replicated};
use crate::buffer::{DeviceBuffer, Element};
use crate::error::{Error, Result};
use crate::queue::DeviceQueue;

impl Devices {
    /// Appends every device's pushed items, in rank order, to every device's `inbox`, which is
    /// emptied first: each inbox then holds `sent[0]`'s first `pushed[0]` items, then
    /// `sent[1]`'s, and so on, and its counter says how many (the sum, also returned). An
    /// all-gather of unequal pieces, enqueued after the work on the devices' streams, which wait
    /// for it: NCCL broadcasts or the copy engines on GPUs as [`Devices::transport`] says (NCCL
    /// has no all-gather of unequal pieces), copies on simulators. Nothing passes through the
    /// host.
    ///
    /// `pushed[d]` is the number of pushes counted into `sent[d]` since it was cleared, as the
    /// launches that pushed reported it ([`Launch::pushed`](crate::Launch::pushed)), so that no
    /// counter is read here; at most a queue's capacity is sent. Queue `d` of `sent` and of
    /// `inboxes` lives on the group's device `d`. An inbox too small for the sum is an
    /// [`Error::QueueOverflow`] naming `inbox`, before anything is copied: grow it
    /// ([`DeviceQueue::grow`]) and call again.
    ///
    /// ```
    /// use lb_runtime::multi::Devices;
    /// use lb_runtime::DeviceQueue;
    /// let devices = Devices::simulators(2)?;
    /// let [a, b] = devices.devices() else { unreachable!() };
    /// let sent = vec![DeviceQueue::new(a, 4)?, DeviceQueue::new(b, 4)?];
    /// let mut inboxes = vec![DeviceQueue::new(a, 8)?, DeviceQueue::new(b, 8)?];
    /// // Nothing pushed: every inbox ends empty.
    /// assert_eq!(devices.all_gather_queues(&sent, &[0, 0], &mut inboxes)?, 0);
    /// assert!(inboxes[1].is_empty()?);
    /// # Ok::<(), lb_runtime::Error>(())
    /// ```
    pub fn all_gather_queues(
        &self,
        sent: &[DeviceQueue],
        pushed: &[u64],
        inboxes: &mut [DeviceQueue],
    ) -> Result<u64> {
        let n = self.count();
        if sent.len() != n || pushed.len() != n || inboxes.len() != n {
            return Err(Error::Shape(format!(
                "gathering queues across {n} devices needs one sent queue, one push count and \
                 one inbox per device, not {}, {} and {}",
                sent.len(),
                pushed.len(),
                inboxes.len()
            )));
        }
        for (d, dev) in self.devices().iter().enumerate() {
            if !sent[d].device().same(dev) || !inboxes[d].device().same(dev) {
                return Err(Error::DeviceMismatch {
                    what: format!("queue {d} of an all-gather: not on the group's device {d}"),
                });
            }
        }
        let mut pieces = Vec::with_capacity(n);
        let mut total = 0usize;
        for (d, (q, &pushed)) in sent.iter().zip(pushed).enumerate() {
            let count = usize::try_from(pushed).map_or(q.capacity(), |p| p.min(q.capacity()));
            pieces.push(Piece {
                root: d,
                src: q.items.device_addr(),
                count,
                dst_at: total,
            });
            total += count;
        }
        if let Some(small) = inboxes.iter().find(|q| q.capacity() < total) {
            return Err(Error::QueueOverflow {
                param: "inbox".into(),
                needed: total as u64,
                capacity: small.capacity() as u64,
            });
        }
        let mut items: Vec<_> = inboxes.iter_mut().map(|q| &mut q.items).collect();
        self.gather_pieces(&pieces, &mut items)?;
        let devices = self.devices();
        // The counters, on the devices' streams after the exchange.
        for (dev, q) in devices.iter().zip(inboxes.iter_mut()) {
            dev.fill(&mut q.count, total as u64)?;
        }
        Ok(total as u64)
    }

    /// Concatenates the first `counts[d]` elements of every device's `sent[d]`, in rank
    /// order, into the start of every copy of `into`, and returns how many that is: the
    /// all-gather of unequal pieces that [`all_gather_queues`](Self::all_gather_queues) makes
    /// of queues, for any element type (the values that go with a queue's items). Enqueued
    /// after the work on the devices' streams, which wait for it. A count beyond its buffer,
    /// or a sum beyond `into`'s length, is an [`Error::Shape`] before anything is copied.
    ///
    /// ```
    /// use lb_runtime::multi::Devices;
    /// let devices = Devices::simulators(2)?;
    /// let [a, b] = devices.devices() else { unreachable!() };
    /// let sent = [a.upload(&[1.5f32, 2.5, 9.0])?, b.upload(&[3.5f32])?];
    /// let mut into = devices.replicated_zeros::<f32>(4)?;
    /// assert_eq!(devices.all_gather_prefixes(&[&sent[0], &sent[1]], &[2, 1], &mut into)?, 3);
    /// assert_eq!(into.download_all()?, vec![vec![1.5, 2.5, 3.5, 0.0]; 2]);
    /// # Ok::<(), lb_runtime::Error>(())
    /// ```
    pub fn all_gather_prefixes<T: Element>(
        &self,
        sent: &[&DeviceBuffer<T>],
        counts: &[usize],
        into: &mut Replicated<T>,
    ) -> Result<usize> {
        let n = self.count();
        if sent.len() != n || counts.len() != n {
            return Err(Error::Shape(format!(
                "gathering prefixes across {n} devices needs one buffer and one count per \
                 device, not {} and {}",
                sent.len(),
                counts.len()
            )));
        }
        self.check_replicated(into, "the copies gathered into")?;
        let mut pieces = Vec::with_capacity(n);
        let mut total = 0usize;
        for (d, (buf, &count)) in sent.iter().zip(counts).enumerate() {
            if !buf.device().same(&self.devices()[d]) {
                return Err(Error::DeviceMismatch {
                    what: format!("buffer {d} of an all-gather: not on the group's device {d}"),
                });
            }
            if count > buf.len() {
                return Err(Error::Shape(format!(
                    "device {d} sends {count} elements of a buffer of {}",
                    buf.len()
                )));
            }
            pieces.push(Piece {
                root: d,
                src: buf.device_addr(),
                count,
                dst_at: total,
            });
            total += count;
        }
        if total > into.len() {
            return Err(Error::Shape(format!(
                "gathering {total} elements into copies of {}: make them larger",
                into.len()
            )));
        }
        let mut copies: Vec<_> = into.copies.iter_mut().collect();
        self.gather_pieces(&pieces, &mut copies)?;
        Ok(total)
    }

    /// Copies `pieces` into every device's destination in `dst` (indexed by device), after the
    /// work on the devices' streams, which wait for the copies.
    fn gather_pieces<T: Element>(
        &self,
        pieces: &[Piece],
        dst: &mut [&mut DeviceBuffer<T>],
    ) -> Result<()> {
        let devices = self.devices();
        let mut exchange = self.exchange();
        let gathered = exchange
            .begin(devices, false, true)
            .and_then(|()| exchange.gather::<T, _>(devices, None, pieces, dst, false));
        let ended = exchange.end(devices, true, None, false);
        gathered.and(ended)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A queue on `dev` holding `items`, with `pushed` pushes counted (more than it holds
    /// when it overflowed).
    fn queue(dev: &crate::Device, items: &[u32], capacity: usize, pushed: u64) -> DeviceQueue {
        let mut q = DeviceQueue::new(dev, capacity).expect("queue");
        dev.write_at(&mut q.items, 0, items).expect("items");
        dev.fill(&mut q.count, pushed).expect("counter");
        q
    }

    #[test]
    fn every_inbox_gets_every_queue_in_rank_order() -> Result<()> {
        let devices = Devices::simulators(3).expect("simulators");
        let d = devices.devices();
        // The second queue overflowed (7 pushes into 3 slots): only what it holds is sent.
        let sent = vec![
            queue(&d[0], &[5, 1], 4, 2),
            queue(&d[1], &[9, 9, 2], 3, 7),
            queue(&d[2], &[], 2, 0),
        ];
        let mut inboxes: Vec<_> = d.iter().map(|dev| queue(dev, &[42; 6], 6, 6)).collect();
        let total = devices
            .all_gather_queues(&sent, &[2, 7, 0], &mut inboxes)
            .expect("gather");
        assert_eq!(total, 5);
        for q in &inboxes {
            assert_eq!(q.download().expect("inbox"), vec![5, 1, 9, 9, 2]);
        }
        // Too little room: refused before anything is copied.
        let mut small: Vec<_> = d.iter().map(|dev| queue(dev, &[3], 4, 1)).collect();
        let err = devices
            .all_gather_queues(&sent, &[2, 3, 0], &mut small)
            .expect_err("overflow");
        assert!(
            matches!(
                err,
                Error::QueueOverflow {
                    needed: 5,
                    capacity: 4,
                    ..
                }
            ),
            "{err}"
        );
        assert_eq!(small[0].download().expect("untouched"), vec![3]);
        // One queue short, and queues on the wrong devices.
        let err = devices
            .all_gather_queues(&sent[..2], &[2, 3], &mut inboxes[..2])
            .expect_err("two of three");
        assert!(matches!(err, Error::Shape(_)), "{err}");
        // Prefixes: a count beyond its buffer, or a sum beyond the copies, is refused.
        let values = [
            d[0].upload(&[1u64, 2])?,
            d[1].upload(&[3u64])?,
            d[2].upload(&[4u64])?,
        ];
        let prefixes: Vec<_> = values.iter().collect();
        let mut into = devices.replicated_zeros::<u64>(3).expect("copies");
        let err = devices
            .all_gather_prefixes(&prefixes, &[2, 2, 0], &mut into)
            .expect_err("beyond buffer 1");
        assert!(err.to_string().contains("device 1 sends 2"), "{err}");
        let err = devices
            .all_gather_prefixes(&prefixes, &[2, 1, 1], &mut into)
            .expect_err("four into three");
        assert!(matches!(err, Error::Shape(_)), "{err}");
        assert_eq!(
            devices.all_gather_prefixes(&prefixes, &[0, 1, 1], &mut into)?,
            2
        );
        assert_eq!(into.download_all()?, vec![vec![3, 4, 0]; 3]);
        inboxes.swap(0, 1);
        let err = devices
            .all_gather_queues(&sent, &[2, 3, 0], &mut inboxes)
            .expect_err("swapped");
        assert!(matches!(err, Error::DeviceMismatch { .. }), "{err}");
        Ok(())
    }
}
