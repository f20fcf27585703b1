//! Random bytes from the kernel (getrandom(2)): test ids that a third party
//! cannot guess, and the nonces of `nettune serve`'s handshake.

use std::io;

/// Fill `buf` with random bytes.
pub fn fill(buf: &mut [u8]) -> io::Result<()> {
    let mut got = 0;
    while got < buf.len() {
        // SAFETY: the pointer and length describe the unfilled part of buf.
        let n = unsafe { libc::getrandom(buf[got..].as_mut_ptr().cast(), buf.len() - got, 0) };
        if n < 0 {
            let err = io::Error::last_os_error();
            if err.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(err);
        }
        got += n as usize;
    }
    Ok(())
}

/// A random non-zero u64.
pub fn nonzero_u64() -> io::Result<u64> {
    loop {
        let mut bytes = [0u8; 8];
        fill(&mut bytes)?;
        let value = u64::from_ne_bytes(bytes);
        if value != 0 {
            return Ok(value);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_draws_differ() {
        let (a, b) = (nonzero_u64().expect("a"), nonzero_u64().expect("b"));
        assert_ne!(a, b);
        let mut buf = [0u8; 64];
        fill(&mut buf).expect("fill");
        assert!(buf.iter().any(|b| *b != 0));
    }
}
