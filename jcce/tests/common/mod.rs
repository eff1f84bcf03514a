//! Shared by the tests: a JCCE service on loopback in its own thread, raw authenticated requests.

#![allow(dead_code)]

use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use jcce::server::{Metrics, Server, ServiceConfig};
use jcce::wire::{self, Key, Kind, Op, UpdateEntry, Writer};

pub fn key() -> Key {
    Key::from_bytes(&[0x5a; 32]).unwrap()
}

/// A service running on its own thread; `stop` returns its final metrics.
pub struct Running {
    pub addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<Result<Metrics, jcce::Error>>>,
}

impl Running {
    pub fn start(listen: &str, cfg: ServiceConfig) -> Running {
        let listen: SocketAddr = listen.parse().unwrap();
        let (addr_tx, addr_rx) = std::sync::mpsc::channel();
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            rt.block_on(async move {
                let server = Server::bind(listen, key(), cfg).await?;
                addr_tx.send(server.local_addr()?).unwrap();
                Ok(server
                    .run(async {
                        let _ = stop_rx.await;
                    })
                    .await)
            })
        });
        let addr = addr_rx
            .recv_timeout(Duration::from_secs(10))
            .expect("service started");
        Running {
            addr,
            stop: Some(stop_tx),
            thread: Some(thread),
        }
    }

    pub fn stop(mut self) -> Metrics {
        self.stop.take().unwrap().send(()).unwrap();
        self.thread.take().unwrap().join().unwrap().unwrap()
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Poll `f` every 5 ms until it returns Some or `limit` passes (a liveness bound, not a
/// performance threshold: failing it means the thing never happened).
pub fn wait_for<T>(limit: Duration, mut f: impl FnMut() -> Option<T>) -> Option<T> {
    let end = Instant::now() + limit;
    loop {
        if let Some(v) = f() {
            return Some(v);
        }
        if Instant::now() > end {
            return None;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A raw peer: one socket, its own sender id and sequence numbers.
pub struct Peer {
    pub sock: UdpSocket,
    pub sender: u64,
    pub seq: u64,
    buf: Vec<u8>,
}

impl Peer {
    pub fn new(server: SocketAddr) -> Peer {
        let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
        sock.connect(server).unwrap();
        sock.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        Peer {
            sock,
            sender: rand::random::<u64>() | 1,
            seq: 0,
            buf: Vec::new(),
        }
    }

    /// An authenticated update datagram with the given entries (not sent).
    pub fn update(&mut self, key: &Key, entries: &[UpdateEntry]) -> Vec<u8> {
        self.seq += 1;
        let mut w = Writer::new(
            &mut self.buf,
            Kind::Update,
            self.sender,
            self.seq,
            wire::unix_micros(),
        );
        for e in entries {
            w.update(e);
        }
        w.finish(key).to_vec()
    }

    /// Send a datagram and wait for one reply datagram (raw bytes).
    pub fn exchange(&self, d: &[u8]) -> Vec<u8> {
        self.sock.send(d).unwrap();
        let mut r = vec![0u8; 70_000];
        let n = self.sock.recv(&mut r).expect("a reply");
        r.truncate(n);
        r
    }

    /// Send a datagram and expect no reply within `wait`.
    pub fn expect_silence(&self, d: &[u8], wait: Duration) {
        self.sock.send(d).unwrap();
        self.sock.set_read_timeout(Some(wait)).unwrap();
        let mut r = vec![0u8; 70_000];
        let got = self.sock.recv(&mut r);
        self.sock
            .set_read_timeout(Some(Duration::from_secs(2)))
            .unwrap();
        assert!(got.is_err(), "unexpected reply of {:?} bytes", got.ok());
    }
}

pub fn publish(group: u64, member: u64, mi: u64, value: u64) -> UpdateEntry {
    UpdateEntry {
        op: Op::Publish,
        group,
        member,
        mi,
        value,
    }
}
