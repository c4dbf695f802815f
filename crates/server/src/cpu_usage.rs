//! CPU time for INFO's cpu section. The process's comes from `getrusage`,
//! to the microsecond as Redis reads it. Redis's "main thread" is the one
//! that runs commands; here the event loops do, and the runtime notes each
//! one's thread ID as it starts, so INFO reads their two `/proc` files
//! rather than the name and times of every thread (about 25 files, most of
//! INFO's time).

use parking_lot::Mutex;

/// The thread IDs of the runtime's threads (event loops, and the blocking
/// threads that take their place while one runs a long command).
static IO_THREADS: Mutex<Vec<i32>> = Mutex::new(Vec::new());

/// For the runtime's `on_thread_start`.
pub fn note_io_thread() {
    IO_THREADS.lock().push(thread_id());
}

/// For the runtime's `on_thread_stop`.
pub fn forget_io_thread() {
    let me = thread_id();
    IO_THREADS.lock().retain(|t| *t != me);
}

fn thread_id() -> i32 {
    // SAFETY: gettid has no preconditions and cannot fail.
    unsafe { libc::gettid() }
}

/// (user, system) seconds of this process (`RUSAGE_SELF`) or of its waited
/// for children (`RUSAGE_CHILDREN`).
fn rusage(who: libc::c_int) -> [f64; 2] {
    // SAFETY: getrusage only writes the struct it is given.
    let u = unsafe {
        let mut u = std::mem::zeroed::<libc::rusage>();
        if libc::getrusage(who, &mut u) != 0 {
            return [0.0; 2];
        }
        u
    };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    [secs(u.ru_utime), secs(u.ru_stime)]
}

pub fn process() -> [f64; 2] {
    rusage(libc::RUSAGE_SELF)
}

pub fn children() -> [f64; 2] {
    rusage(libc::RUSAGE_CHILDREN)
}

/// Linux reports /proc CPU times in USER_HZ, fixed at 100 for user space.
const CLOCK_TICKS_PER_SEC: f64 = 100.0;

/// (user, system) seconds from a `/proc/.../stat` file.
fn stat_times(text: &str) -> Option<[f64; 2]> {
    // The command name (field 2) may contain spaces; fields resume after ')'.
    let rest = text.get(text.rfind(')')? + 1..)?;
    let mut f = rest.split_whitespace().skip(11);
    let mut secs = || Some(f.next()?.parse::<u64>().ok()? as f64 / CLOCK_TICKS_PER_SEC);
    // Fields 14 and 15 (utime, stime); `rest` starts at field 3.
    Some([secs()?, secs()?])
}

/// (user, system) seconds of the threads that run commands, summed; None
/// when there are none (an embedded server on another runtime).
pub fn io_threads() -> Option<[f64; 2]> {
    let threads = IO_THREADS.lock().clone();
    let mut sum: Option<[f64; 2]> = None;
    for tid in threads {
        let Ok(text) = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")) else {
            continue;
        };
        let Some(t) = stat_times(&text) else {
            continue;
        };
        let s = sum.get_or_insert([0.0; 2]);
        s[0] += t[0];
        s[1] += t[1];
    }
    sum
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_noted_thread_is_counted_until_it_is_forgotten() {
        // Spins until the thread itself has run 60 ms (six of /proc's
        // ticks), however long a busy machine takes to give it that.
        let busy = || {
            let own_cpu_ms = || {
                // SAFETY: clock_gettime only writes the struct it is given.
                let mut t = unsafe { std::mem::zeroed::<libc::timespec>() };
                unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
                t.tv_sec as u64 * 1000 + t.tv_nsec as u64 / 1_000_000
            };
            let mut x = 0u64;
            while own_cpu_ms() < 60 {
                x = x.wrapping_add(std::hint::black_box(1));
            }
            x
        };
        let (tx, rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let t = std::thread::spawn(move || {
            note_io_thread();
            busy();
            tx.send(()).unwrap();
            done_rx.recv().unwrap();
            forget_io_thread();
        });
        rx.recv().unwrap();
        let [user, sys] = io_threads().expect("the noted thread");
        assert!(user + sys > 0.0, "{user} {sys}");
        done_tx.send(()).unwrap();
        t.join().unwrap();
        assert!(!IO_THREADS.lock().contains(&thread_id()));
        let [user, sys] = process();
        assert!(user + sys > 0.0);
    }

    #[test]
    fn stat_lines_with_spaces_in_the_name_parse() {
        let line = "42 (durakv io x) S 1 2 3 4 5 6 7 8 9 10 1234 567 89 10 20 0 1";
        assert_eq!(stat_times(line), Some([12.34, 5.67]));
    }
}
