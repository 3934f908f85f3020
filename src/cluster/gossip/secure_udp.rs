//! Authenticated gossip over UDP: a chitchat [`Transport`] that seals every datagram it sends
//! and drops (and counts) every datagram that does not open (see [`super::sealed`]).
//!
//! chitchat 0.13 keeps the encoding of its messages private: a transport is handed a
//! `ChitchatEnvelope` to send and must hand one back on receipt, and only chitchat's own UDP
//! socket turns one into bytes and back. So each [`SealedSocket`] keeps two private loopback
//! pairs, a chitchat `UdpSocket` and a raw socket on 127.0.0.1, and uses them as codecs:
//! - send: chitchat encodes the envelope to the raw end; the bytes read there are sealed and
//!   sent from the public socket;
//! - receive: a datagram read on the public socket is opened (MAC, freshness); only then is
//!   its payload passed through the loopback to chitchat, which decodes it.
//!
//! Nothing that did not prove the secret reaches chitchat's decoder, let alone its state, and an
//! authenticated digest claiming a heartbeat beyond reach is dropped too (see `heartbeats`). Only
//! datagrams from this socket's own raw end are taken from a loopback pair. A codec step cut
//! short (chitchat cancels `recv` on every gossip tick) marks the pair dirty and it is replaced
//! before the next use, so a late datagram can never be paired with the wrong message.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use async_trait::async_trait;
use chitchat::ChitchatEnvelope;
use chitchat::transport::{RecvOutcome, SendOutcome, Socket, Transport, UdpSocket as ChitchatUdp};
use tokio::net::UdpSocket;
use tracing::{debug, warn};

use super::heartbeats::{HeartbeatBook, digest_claims};
use super::sealed::{
    GossipCounters, MAX_SEALED_PAYLOAD_BYTES, MAX_UDP_PAYLOAD_BYTES, Refusal, open, seal,
};
use crate::base::clock::now_ms;

/// How long one loopback codec step may take before the pair is replaced.
const CODEC_TIMEOUT: Duration = Duration::from_millis(500);

/// chitchat's magic number (little endian): a cheap check that an authenticated payload is worth
/// handing to the decoder at all.
const CHITCHAT_MAGIC: [u8; 2] = 45_139u16.to_le_bytes();

/// UDP gossip sealed with the cluster secret.
pub struct SealedUdpTransport {
    secret: Arc<[u8]>,
    counters: Arc<GossipCounters>,
}

impl SealedUdpTransport {
    pub fn new(secret: Arc<[u8]>, counters: Arc<GossipCounters>) -> SealedUdpTransport {
        SealedUdpTransport { secret, counters }
    }
}

#[async_trait]
impl Transport for SealedUdpTransport {
    async fn open(&self, listen_addr: SocketAddr) -> anyhow::Result<Box<dyn Socket>> {
        let public = UdpSocket::bind(listen_addr)
            .await
            .with_context(|| format!("failed to bind to {listen_addr}/UDP for gossip"))?;
        Ok(Box::new(SealedSocket {
            public,
            secret: self.secret.clone(),
            counters: self.counters.clone(),
            recv_buf: vec![0u8; MAX_UDP_PAYLOAD_BYTES + 1].into_boxed_slice(),
            heartbeats: HeartbeatBook::default(),
            encoder: Codec::Idle(Loopback::open().await?),
            decoder: Codec::Idle(Loopback::open().await?),
        }))
    }
}

/// One socket of [`SealedUdpTransport`].
pub struct SealedSocket {
    public: UdpSocket,
    secret: Arc<[u8]>,
    counters: Arc<GossipCounters>,
    recv_buf: Box<[u8]>,
    /// The largest heartbeat accepted per node: a member cannot claim one beyond reach.
    heartbeats: HeartbeatBook,
    encoder: Codec,
    decoder: Codec,
}

/// A loopback pair, and whether a step on it was cut short.
enum Codec {
    Idle(Loopback),
    /// A step started and did not finish: the pair may hold a stray datagram.
    Dirty,
}

impl Codec {
    /// The pair, replaced first if the last step on it was cut short.
    async fn take(&mut self) -> anyhow::Result<Loopback> {
        match std::mem::replace(self, Codec::Dirty) {
            Codec::Idle(pair) => Ok(pair),
            Codec::Dirty => Loopback::open().await,
        }
    }
}

/// chitchat's UDP socket and a raw socket, both on 127.0.0.1, that only talk to each other.
struct Loopback {
    chitchat: ChitchatUdp,
    chitchat_addr: SocketAddr,
    raw: UdpSocket,
    raw_addr: SocketAddr,
    buf: Box<[u8]>,
}

impl Loopback {
    async fn open() -> anyhow::Result<Loopback> {
        let localhost = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
        let chitchat = ChitchatUdp::open(localhost).await?;
        let chitchat_addr = chitchat.local_addr()?;
        let raw = UdpSocket::bind(localhost)
            .await
            .context("binding the gossip codec socket")?;
        let raw_addr = raw.local_addr()?;
        Ok(Loopback {
            chitchat,
            chitchat_addr,
            raw,
            raw_addr,
            buf: vec![0u8; MAX_UDP_PAYLOAD_BYTES + 1].into_boxed_slice(),
        })
    }

    /// chitchat's encoding of `envelope`.
    async fn encode(&mut self, envelope: ChitchatEnvelope) -> anyhow::Result<Vec<u8>> {
        self.chitchat.send(self.raw_addr, envelope).await?;
        let read = async {
            loop {
                let (len, from) = self.raw.recv_from(&mut self.buf).await?;
                if from == self.chitchat_addr {
                    return Ok::<_, std::io::Error>(self.buf[..len].to_vec());
                }
            }
        };
        tokio::time::timeout(CODEC_TIMEOUT, read)
            .await
            .context("gossip encoder timed out")?
            .context("gossip encoder")
    }

    /// chitchat's decoding of `payload`; `None` if chitchat does not read it as a message.
    async fn decode(&mut self, payload: &[u8]) -> anyhow::Result<Option<ChitchatEnvelope>> {
        self.raw.send_to(payload, self.chitchat_addr).await?;
        let read = async {
            loop {
                let outcome = self.chitchat.recv().await?;
                if outcome.from_addr == self.raw_addr {
                    return Ok::<_, anyhow::Error>(outcome.envelope);
                }
            }
        };
        // chitchat's socket skips what it cannot decode and waits for the next datagram, so an
        // undecodable payload shows up as a timeout.
        match tokio::time::timeout(CODEC_TIMEOUT, read).await {
            Ok(envelope) => envelope.map(Some),
            Err(_elapsed) => Ok(None),
        }
    }
}

#[async_trait]
impl Socket for SealedSocket {
    fn local_addr(&self) -> anyhow::Result<SocketAddr> {
        self.public
            .local_addr()
            .context("failed to get UDP socket address")
    }

    async fn send(
        &mut self,
        to: SocketAddr,
        envelope: ChitchatEnvelope,
    ) -> anyhow::Result<SendOutcome> {
        let mut pair = self.encoder.take().await?;
        let payload = pair.encode(envelope).await?;
        self.encoder = Codec::Idle(pair);
        if payload.len() > MAX_SEALED_PAYLOAD_BYTES {
            self.counters.record_oversize();
            warn!(
                len = payload.len(),
                max = MAX_SEALED_PAYLOAD_BYTES,
                %to,
                "gossip message too large to seal; dropped"
            );
            return Ok(SendOutcome { num_bytes_sent: 0 });
        }
        let frame = seal(&self.secret, now_ms(), &payload);
        let num_bytes_sent = self
            .public
            .send_to(&frame, to)
            .await
            .context("failed to send chitchat message to peer")?;
        Ok(SendOutcome { num_bytes_sent })
    }

    /// Cancellable: a cut-short decode leaves the decoder dirty, replaced on the next call.
    async fn recv(&mut self) -> anyhow::Result<RecvOutcome> {
        loop {
            let (len, from_addr) = match self.public.recv_from(&mut self.recv_buf).await {
                Ok(received) => received,
                Err(e) if is_transient(&e) => {
                    warn!(error = %e, "transient UDP recv error");
                    continue;
                }
                Err(e) => return Err(e).context("fatal UDP recv error"),
            };
            let payload = match open(&self.secret, now_ms(), &self.recv_buf[..len]) {
                Ok(payload) => payload,
                Err(refusal) => {
                    self.counters.record(Err(refusal));
                    log_refusal(from_addr, len, refusal);
                    continue;
                }
            };
            self.counters.record(Ok(()));
            let claims = match digest_claims(payload) {
                Ok(claims) if payload[..2] == CHITCHAT_MAGIC => claims,
                _ => {
                    self.counters.record_undecodable();
                    warn!(%from_addr, len, "authenticated gossip payload is not a V0 chitchat message");
                    continue;
                }
            };
            if let Err(refusal) = self.heartbeats.admit(&claims, Instant::now()) {
                self.counters.record_heartbeat_jump();
                warn!(%from_addr, ?refusal, "authenticated gossip dropped: a heartbeat beyond reach (a buggy member?)");
                continue;
            }
            let payload = payload.to_vec();
            let mut pair = match self.decoder.take().await {
                Ok(pair) => pair,
                // Could not open a new codec pair (ports exhausted?): lose this datagram, as UDP
                // may, rather than stop gossip.
                Err(e) => {
                    self.counters.record_undecodable();
                    warn!(%from_addr, error = %e, "gossip decoder unavailable");
                    continue;
                }
            };
            let decoded = pair.decode(&payload).await;
            match decoded {
                Ok(Some(envelope)) => {
                    self.decoder = Codec::Idle(pair);
                    return Ok(RecvOutcome {
                        from_addr,
                        envelope,
                        num_bytes_received: len,
                    });
                }
                // Leave the pair dirty: a late datagram must not meet the next payload.
                Ok(None) => {
                    self.counters.record_undecodable();
                    warn!(%from_addr, len, "authenticated gossip payload does not decode");
                }
                Err(e) => {
                    self.counters.record_undecodable();
                    warn!(%from_addr, error = %e, "gossip decoder failed");
                }
            }
        }
    }
}

fn log_refusal(from: SocketAddr, len: usize, refusal: Refusal) {
    match refusal {
        // Anyone can send a datagram: keep floods out of the default log level.
        Refusal::Malformed => debug!(%from, len, "gossip datagram dropped: not a sealed frame"),
        Refusal::BadMac => debug!(%from, len, "gossip datagram dropped: MAC does not match"),
        Refusal::Stale { skew_ms } => warn!(
            %from,
            skew_ms,
            "gossip datagram dropped: authenticated but stale (is this node's clock off?)"
        ),
    }
}

fn is_transient(err: &std::io::Error) -> bool {
    matches!(
        err.kind(),
        std::io::ErrorKind::OutOfMemory
            | std::io::ErrorKind::ConnectionReset
            | std::io::ErrorKind::ConnectionRefused
    )
}
