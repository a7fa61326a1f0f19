use super::*;
use crate::net::client::{self, MAX_RESPONSE_BYTES};
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::thread;

const SHORT: Deadlines = Deadlines {
    connect: Duration::from_secs(2),
    response: Duration::from_millis(600),
};

/// A listener on 127.0.0.1 whose every connection `answer` serves, on a thread of its own,
/// once the request head has arrived.
fn door(answer: impl Fn(&mut TcpStream) + Send + Sync + 'static) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let answer = std::sync::Arc::new(answer);
    thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            let answer = answer.clone();
            thread::spawn(move || {
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") && conn.read(&mut byte).unwrap_or(0) == 1 {
                    head.push(byte[0]);
                }
                answer(&mut conn);
                let _ = conn.shutdown(Shutdown::Write);
                // Hold the connection until the client closes it.
                let _ = conn.set_read_timeout(Some(Duration::from_secs(20)));
                while conn.read(&mut byte).unwrap_or(0) > 0 {}
            });
        }
    });
    addr
}

fn get(addr: SocketAddr) -> Exchange {
    let request = client::Request {
        method: "GET",
        path: "/",
        headers: &[],
        body: None,
    };
    Exchange {
        addr,
        request: request.encode(addr),
    }
}

fn write(conn: &mut TcpStream, bytes: &[u8]) {
    let _ = conn.write_all(bytes);
}

/// Every exchange to `addrs`, run at once; the answers in order.
fn all(addrs: &[SocketAddr], deadlines: Deadlines) -> Vec<Answer> {
    let mut answers: Vec<Option<Answer>> = addrs.iter().map(|_| None).collect();
    run(addrs.len(), deadlines, |job, answer| match answer {
        None => Some(get(addrs[job])),
        Some(answer) => {
            answers[job] = Some(answer);
            None
        }
    });
    answers.into_iter().map(Option::unwrap).collect()
}

fn error(answer: Answer) -> String {
    answer.expect_err("an error")
}

#[test]
fn a_refused_connection_is_that_exchange_s_error() {
    let addr = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let why = error(one(get(addr), SHORT));
    assert!(
        why.starts_with(&format!("{addr}: cannot connect:")),
        "{why}"
    );
}

#[test]
fn a_door_that_accepts_and_says_nothing_ends_at_the_response_deadline() {
    let silent = door(|_| thread::sleep(Duration::from_secs(10)));
    let why = error(one(get(silent), SHORT));
    assert_eq!(why, format!("{silent}: no complete answer within 600ms"));
}

#[test]
fn a_door_trickling_a_byte_at_a_time_ends_at_the_response_deadline() {
    let trickle = door(|conn| {
        for byte in b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n" {
            write(conn, &[*byte]);
            thread::sleep(Duration::from_millis(50));
        }
    });
    let why = error(one(get(trickle), SHORT));
    assert_eq!(why, format!("{trickle}: no complete answer within 600ms"));
}

#[test]
fn a_response_in_pieces_is_read_whole_and_one_cut_short_is_an_error() {
    let pieces = door(|conn| {
        for piece in [
            &b"HTTP/1.1 200 OK\r\nContent-"[..],
            b"Length: 5\r\n\r\nhe",
            b"llo",
        ] {
            write(conn, piece);
            thread::sleep(Duration::from_millis(30));
        }
    });
    let chunked = door(|conn| {
        write(
            conn,
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nhel",
        );
        thread::sleep(Duration::from_millis(30));
        write(conn, b"\r\n2\r\nlo\r\n0\r\n\r\n");
    });
    let until_close = door(|conn| write(conn, b"HTTP/1.1 404 Not Found\r\n\r\nno such"));
    let cut = door(|conn| write(conn, b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nhel"));
    let garbage = door(|conn| write(conn, b"SSH-2.0-OpenSSH\r\n\r\n"));
    let answers = all(&[pieces, chunked, until_close, cut, garbage], SHORT);
    let mut answers = answers.into_iter();
    let whole = answers.next().unwrap().unwrap();
    assert_eq!((whole.status, &whole.body[..]), (200, &b"hello"[..]));
    assert_eq!(answers.next().unwrap().unwrap().body, b"hello");
    let closed = answers.next().unwrap().unwrap();
    assert_eq!((closed.status, &closed.body[..]), (404, &b"no such"[..]));
    let why = error(answers.next().unwrap());
    assert_eq!(
        why,
        format!("{cut}: bad response: connection closed before the response was complete")
    );
    let why = error(answers.next().unwrap());
    assert!(
        why.starts_with(&format!("{garbage}: bad response:")),
        "{why}"
    );
}

#[test]
fn a_response_over_1_mib_is_refused_either_way_it_is_framed() {
    let declared = door(|conn| write(conn, b"HTTP/1.1 200 OK\r\nContent-Length: 2000000\r\n\r\n"));
    let endless = door(|conn| {
        write(conn, b"HTTP/1.1 200 OK\r\n\r\n");
        let block = vec![b'x'; 64 * 1024];
        for _ in 0..64 {
            write(conn, &block);
        }
    });
    let just_under = door(|conn| {
        write(
            conn,
            format!("HTTP/1.1 200 OK\r\nContent-Length: {MAX_RESPONSE_BYTES}\r\n\r\n").as_bytes(),
        );
        write(conn, &vec![b'y'; MAX_RESPONSE_BYTES]);
    });
    let deadlines = Deadlines {
        response: Duration::from_secs(10),
        ..SHORT
    };
    let mut answers = all(&[declared, endless, just_under], deadlines).into_iter();
    assert_eq!(
        error(answers.next().unwrap()),
        format!("{declared}: bad response: body larger than 1 MiB")
    );
    assert_eq!(
        error(answers.next().unwrap()),
        format!("{endless}: response larger than 1 MiB")
    );
    assert_eq!(
        answers.next().unwrap().unwrap().body.len(),
        MAX_RESPONSE_BYTES
    );
}

#[test]
fn many_at_once_each_get_their_own_answer_and_a_job_may_ask_again() {
    let named = |n: usize| {
        door(move |conn| {
            let body = n.to_string();
            write(
                conn,
                format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}",
                    body.len()
                )
                .as_bytes(),
            );
        })
    };
    let doors: Vec<SocketAddr> = (0..40).map(named).collect();
    let dead = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    // Job n asks door n, then door n+1; every third job first asks a dead port.
    let mut said: Vec<Vec<String>> = vec![Vec::new(); doors.len() - 1];
    run(said.len(), SHORT, |job, answer| {
        let first = if job % 3 == 0 { dead } else { doors[job] };
        let Some(answer) = answer else {
            return Some(get(first));
        };
        let text = answer.map_or_else(|e| e, |r| String::from_utf8(r.body).unwrap());
        said[job].push(text);
        (said[job].len() == 1).then(|| get(doors[job + 1]))
    });
    for (job, said) in said.iter().enumerate() {
        let first = if job % 3 == 0 {
            format!("{dead}: cannot connect: ")
        } else {
            job.to_string()
        };
        assert!(said[0].starts_with(&first), "job {job}: {said:?}");
        assert_eq!(said[1], (job + 1).to_string(), "job {job}");
    }
}

#[test]
fn a_job_without_an_exchange_is_done_and_no_jobs_is_nothing_to_do() {
    let mut asked = Vec::new();
    run(3, SHORT, |job, answer| {
        assert!(answer.is_none(), "nothing was sent");
        asked.push(job);
        None
    });
    assert_eq!(asked, [0, 1, 2]);
    run(0, SHORT, |_, _| unreachable!("no jobs"));
}

#[test]
fn an_exchange_shows_its_address_and_not_its_request() {
    let request = b"POST / HTTP/1.1\r\nAuthorization: Bearer mdt1.secret.mac\r\n\r\n".to_vec();
    let exchange = Exchange {
        addr: "127.0.0.1:9".parse().unwrap(),
        request,
    };
    let shown = format!("{exchange:?}");
    assert!(!shown.contains("secret"), "{shown}");
    assert!(shown.contains("127.0.0.1:9"), "{shown}");
}

#[test]
fn a_job_added_while_a_stuck_one_is_in_flight_is_answered_before_that_ends() {
    let stuck = door(|_| thread::sleep(Duration::from_secs(5)));
    let quick = door(|conn| write(conn, b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"));
    let wake = std::sync::Arc::new(wake::Pipe::new().unwrap());
    let began = Instant::now();
    let mut answered: Vec<(usize, Duration)> = Vec::new();
    let mut asked = 0;
    let looked = std::cell::Cell::new(0);
    let added = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (adder, add) = (wake.clone(), added.clone());
    // The second job comes once the first is in flight, and says so through the pipe.
    thread::spawn(move || {
        thread::sleep(Duration::from_millis(50));
        add.store(true, std::sync::atomic::Ordering::SeqCst);
        if adder.arm() {
            adder.notify();
        }
    });
    run_growing(
        SHORT,
        Some(&wake),
        Duration::ZERO,
        16,
        || {
            looked.set(looked.get() + 1);
            Grown {
                jobs: 1 + usize::from(added.load(std::sync::atomic::Ordering::SeqCst)),
                recheck: None,
                until: None,
            }
        },
        |job, answer| match answer {
            None => {
                asked += 1;
                Some(get([stuck, quick][job]))
            }
            Some(_) => {
                answered.push((job, began.elapsed()));
                None
            }
        },
    );
    assert_eq!(asked, 2);
    assert_eq!(
        answered[0].0, 1,
        "the later job is answered first: {answered:?}"
    );
    assert!(answered[0].1 < SHORT.response, "{answered:?}");
    assert_eq!(
        answered[1].0, 0,
        "the stuck one ends by its deadline: {answered:?}"
    );
    // At the start, when woken, and once after each exchange ended: never on a timer, however
    // long the stuck one hangs.
    assert!(
        looked.get() <= 4,
        "jobs were looked for {} times",
        looked.get()
    );
}

#[test]
fn a_recheck_that_falls_due_is_looked_at_and_most_bounds_what_is_in_flight() {
    let slow = door(|conn| {
        thread::sleep(Duration::from_millis(200));
        write(conn, b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
    });
    let wake = wake::Pipe::new().unwrap();
    let began = Instant::now();
    let at = began + Duration::from_millis(100);
    let mut ended: Vec<Duration> = Vec::new();
    run_growing(
        SHORT,
        Some(&wake),
        Duration::ZERO,
        2,
        || Grown {
            // Two jobs, and two more once `at` has passed: nobody wakes the loop for them.
            jobs: if Instant::now() >= at { 4 } else { 2 },
            recheck: (Instant::now() < at).then_some(at),
            until: None,
        },
        |_, answer| match answer {
            None => Some(get(slow)),
            Some(answer) => {
                assert!(answer.is_ok(), "{answer:?}");
                ended.push(began.elapsed());
                None
            }
        },
    );
    assert_eq!(ended.len(), 4, "{ended:?}");
    // Two at a time: the last two start only once the first two have ended.
    assert!(ended[2] >= Duration::from_millis(400), "{ended:?}");
}

#[test]
fn a_key_that_outlived_its_flight_finds_nothing_when_its_slot_is_reused() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let flight = |job| {
        let stream = socket::connect_started(&addr).unwrap();
        Flight::connecting(job, get(addr), stream, SHORT, None)
    };
    let mut slots = Slots::default();
    let first = slots.insert(flight(0));
    assert_eq!(slots.remove(first).map(|f| f.job), Some(0));
    let second = slots.insert(flight(1));
    assert_eq!(split(second).0, split(first).0, "the slot is reused");
    assert!(
        slots.get(first).is_none(),
        "the old key names the old generation"
    );
    assert!(slots.remove(first).is_none());
    assert_eq!(slots.len(), 1);
    assert_eq!(slots.get(second).map(|f| f.job), Some(1));
    assert_eq!(slots.keys(), [second]);
}
