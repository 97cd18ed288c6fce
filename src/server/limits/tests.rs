use super::*;

fn intake(max_body: usize, budget: usize) -> Intake {
    Intake::new(Limits { max_body_bytes: max_body, max_buffered_body_bytes: budget, ..Limits::default() })
}

#[tokio::test]
async fn bodies_within_limits() {
    let i = intake(10, 15);
    let held = i.read(&HeaderMap::new(), Body::from("0123456789")).await.unwrap();
    assert_eq!(held.bytes.as_ref(), b"0123456789");
    // Ten bytes held: the next body of ten does not fit the budget of fifteen.
    assert_eq!(i.read(&HeaderMap::new(), Body::from("0123456789")).await.err(), Some(IntakeError::Busy));
    drop(held);
    assert!(i.read(&HeaderMap::new(), Body::from("0123456789")).await.is_ok(), "budget given back");
    assert_eq!(
        i.read(&HeaderMap::new(), Body::from("0123456789x")).await.err(),
        Some(IntakeError::TooLarge { max: 10 })
    );
    let mut headers = HeaderMap::new();
    headers.insert(header::CONTENT_LENGTH, "1073741825".parse().unwrap());
    assert_eq!(
        i.read(&headers, Body::from("")).await.err(),
        Some(IntakeError::Declared { declared: 1_073_741_825, max: 10 })
    );
}

#[tokio::test]
async fn the_budget_pays_for_what_is_held_not_what_is_declared() {
    let i = intake(1000, 1000);
    let frames = ["0123456789", "0123456789", "0123456789"].map(|f| Ok::<_, std::io::Error>(Bytes::from(f)));
    let mut headers = HeaderMap::new();
    headers.insert(header::CONTENT_LENGTH, "1000".parse().unwrap());
    let held = i.read(&headers, Body::from_stream(futures::stream::iter(frames))).await.unwrap();
    assert_eq!(held.bytes.len(), 30);
    // One buffer, grown by doubling from the second frame: 40 bytes, not the 1000 declared.
    assert_eq!(i.buffered.available_permits(), 960);
    drop(held);
    assert_eq!(i.buffered.available_permits(), 1000);
    // A small declared length sizes the buffer exactly.
    let frames = ["01234", "56789"].map(|f| Ok::<_, std::io::Error>(Bytes::from(f)));
    headers.insert(header::CONTENT_LENGTH, "10".parse().unwrap());
    let held = i.read(&headers, Body::from_stream(futures::stream::iter(frames))).await.unwrap();
    assert_eq!((held.bytes.as_ref(), i.buffered.available_permits()), (&b"0123456789"[..], 990));
}

#[test]
fn defaults_ignore_the_environment() {
    let limits = Limits::default();
    assert_eq!(limits.max_connections, 64);
    assert_eq!(limits.max_header_bytes, 8 * 1024);
    assert_eq!(limits.max_buffered_body_bytes, 8 * 1024 * 1024);
    assert_eq!(limits.body_read_timeout, Duration::from_secs(5));
}

fn held(i: &Intake, len: usize) -> Held {
    let bytes = Bytes::from(vec![b' '; len]);
    let n = u32::try_from(len).unwrap();
    Held { bytes, _budget: Some(i.buffered.clone().try_acquire_many_owned(n).unwrap()) }
}

#[tokio::test]
async fn heavy_work_runs_off_the_workers_within_the_deadline() {
    let limits =
        Limits { blocking_threshold_bytes: 10, decide_timeout: Duration::from_millis(50), ..Limits::default() };
    let i = Intake::new(limits);
    assert_eq!(i.run(held(&i, 10), |_, claim| claim.decided()).await, Some(true), "small: inline");
    let worker = std::thread::current().id();
    let ran_on = i.run(held(&i, 11), move |_, _| std::thread::current().id()).await.unwrap();
    assert_ne!(ran_on, worker, "large: on the blocking pool");
}

#[tokio::test]
async fn late_work_knows_it_timed_out_and_holds_its_bytes_until_it_ends() {
    let limits = Limits {
        blocking_threshold_bytes: 10,
        max_buffered_body_bytes: 100,
        decide_timeout: Duration::from_millis(50),
        ..Limits::default()
    };
    let i = Intake::new(limits);
    let (release, wait) = std::sync::mpsc::channel::<()>();
    let (told, learned) = tokio::sync::oneshot::channel::<bool>();
    // Answered without the work: the caller allows the write.
    let answer = i
        .run(held(&i, 60), move |_, claim| {
            let _ = wait.recv();
            let _ = told.send(claim.decided());
        })
        .await;
    assert_eq!(answer, None);
    assert_eq!(i.buffered.available_permits(), 40, "the late work still holds its 60 bytes");
    release.send(()).unwrap();
    assert!(!learned.await.unwrap(), "the late work learns that it timed out");
    // The task drops the bytes after reporting; give it the moment it needs.
    for _ in 0..100 {
        if i.buffered.available_permits() == 100 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(i.buffered.available_permits(), 100, "given back when the work ended");
}

#[test]
fn a_claim_is_taken_once() {
    let claim = Claim::default();
    assert!(claim.decided());
    assert!(!claim.time_out(), "decided first: the timeout yields");
    assert!(claim.decided());
    let claim = Claim::default();
    assert!(claim.time_out());
    assert!(!claim.decided(), "timed out first: the work reports as late");
}

#[tokio::test]
async fn stalled_bodies_time_out() {
    let limits = Limits { max_body_bytes: 10, body_read_timeout: Duration::from_millis(50), ..Limits::default() };
    let i = Intake::new(limits);
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<axum::body::Bytes, std::io::Error>>(1);
    tx.send(Ok(Bytes::from_static(b"01234"))).await.unwrap();
    let body = Body::from_stream(tokio_stream_from(rx));
    let err = i.read(&HeaderMap::new(), body).await.err();
    assert_eq!(err, Some(IntakeError::Timeout(0)));
    drop(tx);
}

fn tokio_stream_from(
    mut rx: tokio::sync::mpsc::Receiver<Result<Bytes, std::io::Error>>,
) -> impl futures::Stream<Item = Result<Bytes, std::io::Error>> {
    futures::stream::poll_fn(move |cx| rx.poll_recv(cx))
}
