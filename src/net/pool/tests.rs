use super::*;
use std::sync::atomic::AtomicUsize;
use std::sync::mpsc;

/// A meeting point: each arrival waits until `n` have arrived.
struct Gate {
    arrived: Mutex<usize>,
    all: Condvar,
    n: usize,
}

impl Gate {
    fn new(n: usize) -> Arc<Self> {
        Arc::new(Self {
            arrived: Mutex::new(0),
            all: Condvar::new(),
            n,
        })
    }

    fn meet(&self) {
        let mut arrived = self.arrived.lock().unwrap();
        *arrived += 1;
        self.all.notify_all();
        while *arrived < self.n {
            arrived = self.all.wait(arrived).unwrap();
        }
    }
}

/// Queue `n` jobs that meet at one gate — inside [`blocking`] if `marked` — and say when each
/// is through.
fn meeting(pool: &Arc<Pool>, n: usize, marked: bool) -> mpsc::Receiver<()> {
    let (tx, rx) = mpsc::channel();
    let gate = Gate::new(n);
    for _ in 0..n {
        let (gate, tx) = (gate.clone(), tx.clone());
        let job = Box::new(move || {
            if marked {
                blocking(|| gate.meet());
            } else {
                gate.meet();
            }
            tx.send(()).unwrap();
        });
        assert!(pool.submit(job).is_ok(), "no worker");
    }
    rx
}

#[test]
fn quick_jobs_share_a_few_workers() {
    let pool = Pool::new(64, 64 * 1024);
    let (tx, rx) = mpsc::channel();
    let ran = Arc::new(AtomicUsize::new(0));
    for _ in 0..1000 {
        let (ran, tx) = (ran.clone(), tx.clone());
        let job = Box::new(move || {
            if ran.fetch_add(1, Ordering::SeqCst) == 999 {
                tx.send(()).unwrap();
            }
        });
        assert!(pool.submit(job).is_ok(), "no worker");
    }
    rx.recv_timeout(Duration::from_secs(20)).unwrap();
    assert!(pool.threads() <= EAGER, "{} workers", pool.threads());
}

#[test]
fn waits_marked_blocking_get_a_worker_each_at_once() {
    let pool = Pool::new(64, 64 * 1024);
    let through = meeting(&pool, 20, true);
    // No nudge: only the marks can start the workers twenty meeting jobs need.
    for _ in 0..20 {
        through.recv_timeout(Duration::from_secs(20)).unwrap();
    }
    assert!(pool.threads() >= 20, "{} workers", pool.threads());
}

#[test]
fn unmarked_stuck_waits_are_rescued_one_worker_per_nudge() {
    let pool = Pool::new(64, 64 * 1024);
    let through = meeting(&pool, EAGER + 3, false);
    assert!(
        through.recv_timeout(STALL).is_err(),
        "{EAGER} workers cannot all meet {} ",
        EAGER + 3
    );
    // Nudged as often as the door's thread may be (every event wakes it), it still adds one
    // worker per STALL without progress: three are missing, so that takes three STALLs.
    let (mut nudges, started) = (0, std::time::Instant::now());
    while through.recv_timeout(Duration::from_millis(1)).is_err() {
        pool.nudge();
        nudges += 1;
        assert!(nudges < 10_000, "never rescued");
    }
    assert!(started.elapsed() >= 3 * STALL, "{:?}", started.elapsed());
    assert_eq!(pool.threads(), EAGER + 3, "one worker added per stall");
}
