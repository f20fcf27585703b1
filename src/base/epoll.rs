//! A small epoll wrapper for the per-thread event loops of the bench
//! servers and load generators and the monitor's exporter. Waits take a timeout in microseconds through
//! epoll_pwait2 (Linux 5.11+) so that kernel busy polling can engage
//! (the kernel-vs-DPDK HTTP article: a 0 timeout never sleeps and a millisecond one is
//! too coarse); older kernels fall back to epoll_wait in milliseconds.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

/// What a registration waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Interest {
    pub read: bool,
    pub write: bool,
    /// Edge-triggered: report a change once, the caller drains.
    pub edge: bool,
}

impl Interest {
    pub const READ: Interest = Interest {
        read: true,
        write: false,
        edge: false,
    };
    pub const WRITE: Interest = Interest {
        read: false,
        write: true,
        edge: false,
    };
    pub const READ_WRITE: Interest = Interest {
        read: true,
        write: true,
        edge: false,
    };

    fn bits(self) -> u32 {
        let mut bits = 0;
        if self.read {
            bits |= libc::EPOLLIN as u32 | libc::EPOLLRDHUP as u32;
        }
        if self.write {
            bits |= libc::EPOLLOUT as u32;
        }
        if self.edge {
            bits |= libc::EPOLLET as u32;
        }
        bits
    }
}

/// One ready registration.
#[derive(Debug, Clone, Copy)]
pub struct Ready {
    pub token: u64,
    pub readable: bool,
    pub writable: bool,
    /// Peer closed or error: the caller should read to find out, then close.
    pub hangup: bool,
}

pub struct Epoll {
    fd: OwnedFd,
    events: Vec<libc::epoll_event>,
    /// epoll_pwait2 answered ENOSYS once: use epoll_wait from then on.
    no_pwait2: bool,
}

/// The epoll descriptor, for per-instance settings (EPIOCSPARAMS).
impl AsFd for Epoll {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl Epoll {
    /// `capacity`: most events returned by one wait.
    pub fn new(capacity: usize) -> io::Result<Epoll> {
        // SAFETY: epoll_create1 takes flags only.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Epoll {
            // SAFETY: fd is a new descriptor we own.
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
            events: vec![libc::epoll_event { events: 0, u64: 0 }; capacity.max(1)],
            no_pwait2: false,
        })
    }

    fn ctl(&self, op: libc::c_int, fd: RawFd, token: u64, interest: Interest) -> io::Result<()> {
        let mut event = libc::epoll_event {
            events: interest.bits(),
            u64: token,
        };
        // SAFETY: event outlives the call; the kernel copies it.
        let rc = unsafe { libc::epoll_ctl(self.fd.as_raw_fd(), op, fd, &mut event) };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    pub fn add(&self, fd: RawFd, token: u64, interest: Interest) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_ADD, fd, token, interest)
    }

    pub fn modify(&self, fd: RawFd, token: u64, interest: Interest) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_MOD, fd, token, interest)
    }

    pub fn delete(&self, fd: RawFd) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_DEL, fd, 0, Interest::READ)
    }

    /// Wait up to `timeout` (`None` = forever) and return the ready
    /// registrations. EINTR returns an empty list (the caller checks its
    /// stop flag).
    pub fn wait(&mut self, timeout: Option<Duration>) -> io::Result<Vec<Ready>> {
        let mut ready = Vec::new();
        self.wait_into(timeout, &mut ready)?;
        Ok(ready)
    }

    /// [`Epoll::wait`] into a list the caller keeps (cleared first), so a
    /// hot loop does not allocate on every wait.
    pub fn wait_into(
        &mut self,
        timeout: Option<Duration>,
        ready: &mut Vec<Ready>,
    ) -> io::Result<()> {
        let n = self.wait_raw(timeout)?;
        ready.clear();
        ready.extend(self.events[..n].iter().map(|e| {
            let bits = e.events;
            Ready {
                token: e.u64,
                readable: bits & (libc::EPOLLIN as u32) != 0,
                writable: bits & (libc::EPOLLOUT as u32) != 0,
                hangup: bits
                    & (libc::EPOLLHUP as u32 | libc::EPOLLERR as u32 | libc::EPOLLRDHUP as u32)
                    != 0,
            }
        }));
        Ok(())
    }

    fn wait_raw(&mut self, timeout: Option<Duration>) -> io::Result<usize> {
        let max = self.events.len() as libc::c_int;
        if !self.no_pwait2 {
            let ts = timeout.map(|t| libc::timespec {
                tv_sec: t.as_secs() as libc::time_t,
                tv_nsec: t.subsec_nanos() as libc::c_long,
            });
            let ts_ptr = ts
                .as_ref()
                .map_or(std::ptr::null(), |t| t as *const libc::timespec);
            // SAFETY: events has room for `max` entries; ts lives across the call.
            let rc = unsafe {
                libc::syscall(
                    libc::SYS_epoll_pwait2,
                    self.fd.as_raw_fd(),
                    self.events.as_mut_ptr(),
                    max,
                    ts_ptr,
                    std::ptr::null::<libc::sigset_t>(),
                    0usize,
                )
            };
            if rc >= 0 {
                return Ok(rc as usize);
            }
            let err = io::Error::last_os_error();
            match err.raw_os_error() {
                Some(libc::EINTR) => return Ok(0),
                Some(libc::ENOSYS) => self.no_pwait2 = true,
                _ => return Err(err),
            }
        }
        // Round up: a 100 us timeout must not become 0 (which never sleeps).
        let ms = timeout.map_or(-1, |t| {
            t.as_micros().div_ceil(1000).min(i32::MAX as u128) as i32
        });
        // SAFETY: as above.
        let rc =
            unsafe { libc::epoll_wait(self.fd.as_raw_fd(), self.events.as_mut_ptr(), max, ms) };
        if rc < 0 {
            let err = io::Error::last_os_error();
            if err.raw_os_error() == Some(libc::EINTR) {
                return Ok(0);
            }
            return Err(err);
        }
        Ok(rc as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::unix::net::UnixStream;

    #[test]
    fn reports_readable_with_its_token_and_times_out_when_idle() {
        // A wait cut short by a signal (other tests in this process raise
        // some) returns no event: wait again until something is ready.
        fn next(poll: &mut Epoll) -> Vec<Ready> {
            for _ in 0..50 {
                let ready = poll.wait(Some(Duration::from_millis(100))).expect("wait");
                if !ready.is_empty() {
                    return ready;
                }
            }
            Vec::new()
        }
        let (mut a, b) = UnixStream::pair().expect("pair");
        let mut poll = Epoll::new(8).expect("epoll");
        poll.add(b.as_raw_fd(), 42, Interest::READ).expect("add");
        let idle = poll.wait(Some(Duration::from_micros(200))).expect("wait");
        assert!(idle.is_empty());
        a.write_all(b"x").expect("write");
        let ready = next(&mut poll);
        assert_eq!(ready.len(), 1);
        assert_eq!(ready[0].token, 42);
        assert!(ready[0].readable);
        drop(a);
        let ready = next(&mut poll);
        assert!(ready[0].hangup);
        poll.delete(b.as_raw_fd()).expect("delete");
    }
}
