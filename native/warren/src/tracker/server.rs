//! The tracker's network side (tokio): handshake and authentication of each connection, then
//! frames in and out. Decisions are the [`Registry`]'s.

use std::sync::Arc;
use std::time::{Duration, Instant};

use log::{info, warn};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;
use tokio::sync::mpsc::{UnboundedSender, unbounded_channel};

use super::fencing;
use super::join_hold;
use super::outcome::JobReport;
use super::proto::{FromTracker, ToTracker};
use super::registry::{Registered, WorkerState};
use super::replies::{answer_view, assign, job_failed, refuse, roster_reply};
use super::state::{Shared, SharedState, set_outcome};
use crate::error::Error;
use crate::membership::{Change, View};
use crate::wire::auth::Purpose;
use crate::wire::{self, FrameReader};

/// Serves authenticated connections until the runtime shuts down.
pub(crate) async fn serve(listener: TcpListener, state: SharedState, secret: Arc<Vec<u8>>, tls: Option<wire::Tls>) {
    wire::serve(listener, secret, tls, Purpose::Tracker, "tracker", move |stream| connection(stream, state.clone()))
        .await
}

/// Fails the job if not all workers have arrived by `deadline`.
pub(crate) async fn rendezvous_deadline(state: SharedState, after: Duration) {
    tokio::time::sleep(after).await;
    let mut s = state.0.lock().unwrap();
    if !s.registry.assigned() {
        let msg = format!("rendezvous timed out after {after:?}: {}", s.registry.missing_description());
        warn!("tracker: {msg}");
        for (_, tx) in s.conns.values() {
            let _ = tx.send(FromTracker::Error { message: msg.clone() });
        }
        set_outcome(&state, &mut s, Err(msg));
    }
}

async fn connection(stream: wire::ServiceStream, state: SharedState) {
    let peer = stream.peer_addr().map(|a| a.to_string()).unwrap_or_default();
    state.0.lock().unwrap().open_connections += 1;
    let (rd, mut wr) = stream.into_split();
    let (tx, mut rx) = unbounded_channel::<FromTracker>();
    let writer = tokio::spawn(async move {
        while let Some(msg) = rx.recv().await {
            let fatal =
                matches!(msg, FromTracker::Error { .. } | FromTracker::JobFailed { .. } | FromTracker::Fenced { .. });
            if wr.write_all(&wire::encode_frame(&msg)).await.is_err() || fatal {
                break;
            }
        }
        let _ = wr.shutdown().await;
    });
    let mut me: Option<(String, u64)> = None;
    let mut frames = FrameReader::new(rd, peer.clone());
    let end_reason = loop {
        match frames.next::<ToTracker>().await {
            Ok(Some(msg)) => {
                if let Err(reason) = handle(&state, &tx, &mut me, msg) {
                    break reason;
                }
            }
            Ok(None) => break "connection closed".to_string(),
            Err(e @ Error::Protocol(_)) => {
                warn!("tracker: {peer}: {e}");
                let _ = tx.send(FromTracker::Error { message: e.to_string() });
                break e.to_string();
            }
            Err(e) => break e.to_string(),
        }
    };
    // Forget this connection first: the map holds a sender of this connection's writer, which
    // must be dropped for the writer to finish.
    if let Some((task_id, conn_id)) = me {
        let mut s = state.0.lock().unwrap();
        let current = s.conns.get(&task_id).map(|(id, _)| *id) == Some(conn_id);
        if current {
            s.conns.remove(&task_id);
            let running = s.registry.state_of(&task_id) == Some(WorkerState::Running);
            if let Some(l) = s.liveness.as_mut() {
                // A running worker whose connection ended is lost, and its incarnation refused:
                // should its process live on (its connection closed under it), its next
                // heartbeat is refused, and it stops with the fenced error instead of taking
                // part, unwatched, in rounds that wait for its replacement. Should it send no
                // heartbeat at all (paused or frozen, or its heartbeat connection closed too)
                // and its task not register again within the peer timeout, it is fenced, and
                // its runner ends that attempt if it still runs.
                if running {
                    l.cut(&task_id);
                } else {
                    l.forget(&task_id);
                }
            }
            if running {
                s.registry.lost(&task_id);
                let rank = s.registry.rank_of(&task_id).map(|r| r.to_string()).unwrap_or_else(|| "-".into());
                warn!("tracker: worker rank {rank} (task {task_id}) lost: {end_reason} ({peer})");
            } else {
                s.registry.finished_connection_ended(&task_id);
            }
        }
    }
    // A heartbeat connection's sender is also held by `beat_conns` (to tell it about fenced
    // peers): drop that too, else the writer never ends and the connection stays open.
    {
        let mut s = state.0.lock().unwrap();
        s.beat_conns.retain(|_, beats| !beats.same_channel(&tx));
        s.held.retain(|held| !held.same_channel(&tx));
    }
    drop(tx);
    let _ = writer.await;
    state.0.lock().unwrap().open_connections -= 1;
    state.1.notify_all();
}

/// Tells the others that a round opened, and everyone the new addresses once it is complete.
fn announce_round(s: &mut Shared, task_id: &str, rank: usize, opened: bool, complete: Option<View>) {
    if opened {
        for (tid, (_, t)) in s.conns.iter() {
            if tid != task_id {
                let _ = t.send(FromTracker::RoundStarted { by_rank: rank });
            }
        }
    }
    if let Some(view) = complete {
        let since_fence = match s.last_fence.take() {
            Some((at, task)) => format!(" ({:.0?} after task {task} was fenced)", at.elapsed()),
            None => String::new(),
        };
        info!(
            "tracker: re-link round {} complete; {} workers re-linking{since_fence}",
            s.registry.rounds(),
            view.world()
        );
        assign(s, &view);
        s.restarted.clear();
    }
}

/// Handles one message; `Err` ends the connection with that reason.
fn handle(
    state: &SharedState,
    tx: &UnboundedSender<FromTracker>,
    me: &mut Option<(String, u64)>,
    msg: ToTracker,
) -> Result<(), String> {
    let mut s = state.0.lock().unwrap();
    let s = &mut *s;
    if let Some((task_id, conn_id)) = me.as_ref() {
        if s.liveness.as_ref().is_some_and(|l| l.is_fenced(*conn_id)) {
            return fencing::refuse_fenced(tx, task_id);
        }
    }
    match msg {
        ToTracker::Register { task_id, host, port, attempt, pid, host_id } => {
            if let Some(conn_id) = register(state, s, tx, &task_id, (&host, port, pid, &host_id), attempt)? {
                *me = Some((task_id, conn_id));
            }
        }
        ToTracker::Beat { task_id, incarnation, stall } => fencing::beat(s, tx, &task_id, incarnation, stall)?,
        ToTracker::Rejoin { host, port, version } => {
            let Some((task_id, _)) = me.as_ref() else {
                return Err("rejoin before registering".into());
            };
            if let Some(Err(failure)) = &s.outcome {
                if s.failed_finally {
                    return job_failed(tx, failure);
                }
                return refuse(tx, format!("the job has already failed: {failure}"));
            }
            s.registry.set_version(task_id, version);
            rejoin(s, tx, task_id, &host, port)?;
        }
        ToTracker::Print { msg } => {
            let who = me.as_ref().map(|(t, _)| match s.registry.rank_of(t) {
                Some(r) => format!("rank {r}"),
                None => format!("task {t}"),
            });
            info!("[{}] {msg}", who.unwrap_or_else(|| "unregistered".into()));
            let _ = tx.send(FromTracker::Ack);
        }
        ToTracker::Failed { message } => {
            let who = match me.as_ref() {
                Some((t, _)) => match s.registry.rank_of(t) {
                    Some(r) => format!("rank {r} (task {t})"),
                    None => format!("task {t}"),
                },
                None => "an unregistered worker".to_string(),
            };
            let failure = format!("{who} failed with an error that cannot succeed on retry: {message}");
            if s.failed_finally {
                // Every rank of a mismatch reports it: the first report is the job's failure.
                info!("tracker: {failure}");
            } else {
                warn!(
                    "tracker: {failure}; the job has failed, and tasks that register from now on are held until it is stopped"
                );
                // The others stop too, rather than wait for a replacement that cannot come.
                let me_task = me.as_ref().map(|(t, _)| t.as_str());
                for (tid, (_, t)) in s.conns.iter() {
                    if Some(tid.as_str()) != me_task {
                        let _ = t.send(FromTracker::JobFailed { message: failure.clone() });
                    }
                }
            }
            s.failed_finally = true;
            set_outcome(state, s, Err(failure));
            let _ = tx.send(FromTracker::Ack);
        }
        ToTracker::Shutdown => {
            let Some((task_id, _)) = me.as_ref() else {
                return Err("shutdown before registering".into());
            };
            shutdown(state, s, tx, task_id);
        }
        ToTracker::ViewAt { version } => {
            let Some((task_id, _)) = me.as_ref() else {
                return Err("view request before registering".into());
            };
            view_at(state, s, tx, task_id, version)?;
        }
        ToTracker::Control { change, task_id, at } => match control(s, change.into(), &task_id, at) {
            Ok(()) => {
                let _ = tx.send(roster_reply(&s.registry));
            }
            Err(message) => {
                warn!("tracker: refused {change:?} task {task_id}: {message}");
                let _ = tx.send(FromTracker::Error { message });
            }
        },
        ToTracker::List => {
            let _ = tx.send(roster_reply(&s.registry));
        }
        ToTracker::Status => {
            let _ = tx.send(FromTracker::Status {
                world: s.registry.world(),
                registered: s.registry.task_ids(None),
                finished: s.registry.task_ids(Some(WorkerState::Finished)),
                lost: s.registry.task_ids(Some(WorkerState::Lost)),
            });
        }
    }
    Ok(())
}

/// A registration (task id, listener host and port, process id): returns the id of this
/// connection if it now stands for the task (`None` when the worker is asked to retry).
fn register(
    state: &SharedState,
    s: &mut Shared,
    tx: &UnboundedSender<FromTracker>,
    task_id: &str,
    (host, port, pid, host_id): (&str, u16, u32, &str),
    attempt: u32,
) -> Result<Option<u64>, String> {
    if let Some(Err(failure)) = &s.outcome {
        if s.failed_finally {
            // Refused, a re-run would fail at once and its runner try again, as often as it
            // may; held, it waits until the runner stops the job.
            info!(
                "tracker: task {task_id} (attempt {attempt}) registered after the job failed; held until the job is stopped"
            );
            s.held.push(tx.clone());
            return Ok(None);
        }
        return refuse(tx, format!("the job has already failed: {failure}")).map(|_| None);
    }
    let outcome = s.registry.register(task_id, host, port);
    if !matches!(outcome, Registered::Busy(_) | Registered::Rejected(_)) {
        // Before any assignment goes out, so every worker's peers carry it.
        s.registry.set_pid(task_id, pid);
        s.registry.set_attempt(task_id, attempt);
        s.registry.set_host_id(task_id, host_id);
        // The task runs again: an earlier incarnation whose connection was cut is replaced.
        if let Some(l) = s.liveness.as_mut() {
            l.gone(task_id);
        }
    }
    s.next_conn += 1;
    let conn_id = s.next_conn;
    match outcome {
        Registered::Busy(message) => {
            info!("tracker: task {task_id}: {message}; asked to retry");
            let _ = tx.send(FromTracker::Retry { message });
            return Ok(None);
        }
        Registered::Rejected(message) => {
            warn!("tracker: refused task {task_id}: {message}");
            return refuse(tx, message).map(|_| None);
        }
        Registered::Left(message) => {
            info!("tracker: {message}");
            let _ = tx.send(FromTracker::Left { message: message.clone() });
            return Err(message);
        }
        Registered::Waiting { arrived } => {
            let world = s.registry.world();
            info!("tracker: task {task_id} registered (attempt {attempt}), {arrived}/{world} arrived");
            s.conns.insert(task_id.to_string(), (conn_id, tx.clone()));
        }
        Registered::Assigned(view) => {
            s.conns.insert(task_id.to_string(), (conn_id, tx.clone()));
            let (world, elapsed) = (view.world(), s.started.elapsed());
            info!("tracker: all {world} workers arrived in {elapsed:.2?}; ranks assigned");
            assign(s, &view);
        }
        Registered::Admitted => {
            info!("tracker: task {task_id} registered (attempt {attempt}); joins at the next checkpoint boundary");
            s.conns.insert(task_id.to_string(), (conn_id, tx.clone()));
            join_hold::release(state, s);
        }
        Registered::RoundJoined { rank, opened, complete } => {
            info!("tracker: task {task_id} (rank {rank}) registered again (attempt {attempt}): re-link round");
            s.conns.insert(task_id.to_string(), (conn_id, tx.clone()));
            s.restarted.insert(task_id.to_string());
            announce_round(s, task_id, rank, opened, complete);
        }
    }
    Ok(Some(conn_id))
}

/// A surviving worker asks to re-link.
fn rejoin(
    s: &mut Shared,
    tx: &UnboundedSender<FromTracker>,
    task_id: &str,
    host: &str,
    port: u16,
) -> Result<(), String> {
    match s.registry.rejoin(task_id, host, port) {
        Registered::RoundJoined { rank, opened, complete } => {
            info!("tracker: rank {rank} (task {task_id}) asks to re-link");
            announce_round(s, task_id, rank, opened, complete);
            Ok(())
        }
        other => {
            let message = match other {
                Registered::Rejected(m) => m,
                o => format!("cannot re-link task {task_id}: {o:?}"),
            };
            warn!("tracker: rank re-link refused: {message}");
            refuse(tx, message)
        }
    }
}

/// A worker finished (a robust member: it passed the final barrier). It waits, serving the
/// replacement of a member lost before that member finished (a round then opens, which it
/// re-links into); once every member has finished, the job is done, and every member is told
/// ([`FromTracker::JobDone`], after its acknowledgement, which must reach the worker before
/// whoever waits for the job stops the tracker). A finished worker stays watched (it beats
/// until it is told) until its connection ends.
fn shutdown(state: &SharedState, s: &mut Shared, tx: &UnboundedSender<FromTracker>, task_id: &str) {
    let all = s.registry.finished(task_id);
    let rank = s.registry.rank_of(task_id).map(|r| r.to_string()).unwrap_or_default();
    info!("tracker: worker rank {rank} (task {task_id}) finished");
    let _ = tx.send(FromTracker::Ack);
    if all && s.failed_finally {
        info!("tracker: every worker has left the job, which failed");
    } else if all {
        for (_, c) in s.conns.values() {
            let _ = c.send(FromTracker::JobDone);
        }
        let report =
            JobReport { world: s.registry.world(), recoveries: s.registry.recoveries(), elapsed: s.started.elapsed() };
        info!(
            "tracker: all {} workers finished in {:.2?} ({} recoveries)",
            report.world, report.elapsed, report.recoveries
        );
        set_outcome(state, s, Ok(report));
    }
}

/// A control request (add, remove, restart, give up) on an elastic job, from `warren ctl` or
/// the tracker's API; an add's or restart's time starts its join hold.
pub(crate) fn control(s: &mut Shared, change: Change, task_id: &str, at: Option<u32>) -> Result<(), String> {
    s.registry.control(change, task_id, at)?;
    if matches!(change, Change::Add | Change::Restart) {
        s.join_requested.insert(task_id.to_string(), Instant::now());
    }
    info!("tracker: {change:?} task {task_id} (at checkpoint version {at:?} or later)");
    Ok(())
}

/// A member of an elastic job asks which view holds after checkpoint `version`: answered now,
/// or parked while a task it would admit is still starting ([`join_hold`]).
fn view_at(
    state: &SharedState,
    s: &mut Shared,
    tx: &UnboundedSender<FromTracker>,
    task_id: &str,
    version: u32,
) -> Result<(), String> {
    match join_hold::hold_until(s, version, Instant::now()) {
        Some(until) => join_hold::park(state, s, tx, task_id, version, until),
        None => return answer_view(s, tx, task_id, version),
    }
    Ok(())
}
