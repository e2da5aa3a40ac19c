//! [`Runtime`]: the async runtime openraft runs on. It is tokio's in every
//! respect but one: the random numbers openraft draws (its election
//! timeouts) come from a generator that [`seed`] can fix for the calling
//! thread, so a simulation that runs every node on one thread under a seed
//! replays the same elections. Unseeded (every node in production), they
//! come from the operating system's entropy, as with tokio's runtime.

use std::cell::RefCell;
use std::future::Future;
use std::time::Duration;

use openraft::{AsyncRuntime, OptionalSend, TokioRuntime};
use rand::rngs::StdRng;
use rand::{RngCore, SeedableRng};

thread_local! {
    static SEEDED: RefCell<Option<StdRng>> = const { RefCell::new(None) };
}

/// From now on, draw this thread's Raft randomness from `seed` (a
/// simulation's: every node it runs on this thread shares the stream, in
/// the order they draw, which the simulation makes deterministic).
pub fn seed(seed: u64) {
    SEEDED.with(|r| *r.borrow_mut() = Some(StdRng::seed_from_u64(seed)));
}

/// Back to the operating system's entropy on this thread.
pub fn unseed() {
    SEEDED.with(|r| *r.borrow_mut() = None);
}

/// The generator openraft gets: this thread's seeded one, if any.
#[derive(Clone, Copy, Debug, Default)]
pub struct RaftRng;

fn draw<T>(f: impl FnOnce(&mut dyn RngCore) -> T) -> T {
    SEEDED.with(|r| match r.borrow_mut().as_mut() {
        Some(seeded) => f(seeded),
        None => f(&mut rand::thread_rng()),
    })
}

impl RngCore for RaftRng {
    fn next_u32(&mut self) -> u32 {
        draw(|r| r.next_u32())
    }

    fn next_u64(&mut self) -> u64 {
        draw(|r| r.next_u64())
    }

    fn fill_bytes(&mut self, dest: &mut [u8]) {
        draw(|r| r.fill_bytes(dest))
    }

    fn try_fill_bytes(&mut self, dest: &mut [u8]) -> Result<(), rand::Error> {
        draw(|r| r.try_fill_bytes(dest))
    }
}

/// tokio, with [`RaftRng`].
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Runtime;

type Tokio = TokioRuntime;

impl AsyncRuntime for Runtime {
    type JoinError = <Tokio as AsyncRuntime>::JoinError;
    type JoinHandle<T: OptionalSend + 'static> = <Tokio as AsyncRuntime>::JoinHandle<T>;
    type Sleep = <Tokio as AsyncRuntime>::Sleep;
    type Instant = <Tokio as AsyncRuntime>::Instant;
    type TimeoutError = <Tokio as AsyncRuntime>::TimeoutError;
    type Timeout<R, T: Future<Output = R> + OptionalSend> = <Tokio as AsyncRuntime>::Timeout<R, T>;
    type ThreadLocalRng = RaftRng;
    type OneshotSender<T: OptionalSend> = <Tokio as AsyncRuntime>::OneshotSender<T>;
    type OneshotReceiverError = <Tokio as AsyncRuntime>::OneshotReceiverError;
    type OneshotReceiver<T: OptionalSend> = <Tokio as AsyncRuntime>::OneshotReceiver<T>;

    fn spawn<T>(future: T) -> Self::JoinHandle<T::Output>
    where
        T: Future + OptionalSend + 'static,
        T::Output: OptionalSend + 'static,
    {
        Tokio::spawn(future)
    }

    fn sleep(duration: Duration) -> Self::Sleep {
        Tokio::sleep(duration)
    }

    fn sleep_until(deadline: Self::Instant) -> Self::Sleep {
        Tokio::sleep_until(deadline)
    }

    fn timeout<R, F: Future<Output = R> + OptionalSend>(
        duration: Duration,
        future: F,
    ) -> Self::Timeout<R, F> {
        Tokio::timeout(duration, future)
    }

    fn timeout_at<R, F: Future<Output = R> + OptionalSend>(
        deadline: Self::Instant,
        future: F,
    ) -> Self::Timeout<R, F> {
        Tokio::timeout_at(deadline, future)
    }

    fn is_panic(join_error: &Self::JoinError) -> bool {
        Tokio::is_panic(join_error)
    }

    fn thread_rng() -> Self::ThreadLocalRng {
        RaftRng
    }

    fn oneshot<T>() -> (Self::OneshotSender<T>, Self::OneshotReceiver<T>)
    where
        T: OptionalSend,
    {
        Tokio::oneshot()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn timeouts() -> Vec<u64> {
        let config = openraft::Config {
            election_timeout_min: 150,
            election_timeout_max: 300,
            ..Default::default()
        };
        (0..8)
            .map(|_| config.new_rand_election_timeout::<Runtime>())
            .collect()
    }

    #[test]
    fn a_seed_replays_the_election_timeouts_and_another_seed_does_not() {
        seed(7);
        let first = timeouts();
        seed(7);
        assert_eq!(timeouts(), first, "the same seed, the same timeouts");
        seed(8);
        assert_ne!(timeouts(), first, "another seed, other timeouts");
        unseed();
        let drawn = timeouts();
        assert!(drawn.iter().all(|t| (150..300).contains(t)), "{drawn:?}");
    }
}
