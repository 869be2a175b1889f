/* watchkeeper-monitor: the per-run monitor as one small process (see core/monitor.py).
 *
 *   watchkeeper-monitor FOLDER HEAD TAIL TIMEOUT GRACE JOB-ARGV...
 *
 * Like conmon or containerd-shim, it outlives the runner that started it and holds what the
 * runner would otherwise lose with it: the job's output and its exit status. One process per
 * run (the sh monitor needs eight): it forks the job into a session of its own, reads both
 * output pipes itself, keeps the deadline itself and writes the status, all from one poll()
 * loop. The files it writes in FOLDER are the protocol core/monitor.py reads:
 *
 *   monitor.pid, job.pid, exit   one line each; exit written over the blank line made at the
 *                                start (no new disk block when the disk fills meanwhile); a
 *                                symlink to the number when a write fails
 *   STREAM.log                   the first HEAD bytes, written as they come (logs -f)
 *   STREAM.ring                  the last TAIL bytes past the head: byte i of that part at
 *                                offset i % TAIL, so the file never grows past TAIL
 *   STREAM.count                 "N bytes\n": how many bytes came past the head (N)
 *   timed_out                    empty: the job was ended at its deadline
 *
 * Its stdout carries one line, the job's pid, printed as soon as the job is forked and leads
 * a process group of its own (so a group kill from then on reaches the job); its exit status
 * is the job's, as a shell reports it (128 + N for death by signal N). Only monitor.pid is
 * written before that line: from the moment the runner has the pid, a runner that takes over
 * (it crashed right after) must find this monitor alive (core/monitor.py: monitor_alive). Every
 * other file is made after it: the runner waits for the pid, and each file made on a slow
 * disk cost it a fifth of a millisecond (the job's first output waits in its pipe meanwhile).
 *
 * The job gets a process group, not a session: the parent can make the group itself
 * (setpgid on its child, the way a shell does job control), so the pid is reported without
 * waiting for the child to run. A session can only be made by the child, and waiting for a
 * child that setsid() just moved to a new scheduler autogroup cost a median 14 ms per start
 * on a loaded 2-core host (the bench). The monitor's own session has no controlling
 * terminal, so the job has none either, and the job still has its CPU share of its own.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NAME "watchkeeper-monitor"
#define BUF (1 << 16) /* one pipe's worth per read: the only sizeable memory it touches */

extern char **environ;

static int dir_fd = -1;
static int chld_w = -1; /* write end of the SIGCHLD self-pipe */
static char buf[BUF];

struct stream {
    const char *name;
    int in;                 /* read end of the job's pipe; -1 once at its end */
    int log, ring, count;   /* files in FOLDER; -1 until needed (ring, count) */
    int over;               /* bytes came past the head: ring and count were made */
    unsigned long long seen; /* bytes read so far */
};

static unsigned long long head_cap, tail_cap;

static void die(const char *what) {
    /* Before the pid line: the runner reads no pid and reports the start as failed. */
    dprintf(2, NAME ": %s: %s\n", what, strerror(errno));
    _exit(125);
}

static void on_chld(int sig) {
    int saved = errno;
    (void)sig;
    if (write(chld_w, "", 1) < 0) { /* full pipe: a wake-up is already pending */ }
    errno = saved;
}

static int open_in(const char *stream, const char *ext, int flags) {
    char path[64];
    snprintf(path, sizeof path, "%s.%s", stream, ext);
    return openat(dir_fd, path, flags | O_WRONLY | O_CLOEXEC, 0600);
}

/* One number on its line, over a blank line made earlier when there is one (``blank``):
 * O_TRUNC would free the block and a full disk could then refuse the write. Where even that
 * fails (a disk full from the start), a symlink whose target is the number needs no block. */
static int write_line(const char *file, long long n) {
    char line[32];
    int len = snprintf(line, sizeof line, "%lld\n", n);
    int fd = openat(dir_fd, file, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    int ok = fd >= 0 && write(fd, line, len) == len;
    if (fd >= 0)
        close(fd);
    if (!ok) {
        line[len - 1] = '\0';
        unlinkat(dir_fd, file, 0);
        ok = symlinkat(line, dir_fd, file) == 0; /* else nothing left to try: the exit status carries it */
    }
    return ok;
}

/* The blank line ``write_line`` later writes the exit status over (core/monitor.py's BLANK:
 * 23 spaces and a newline); left empty when the disk is already full. */
static void blank(const char *file) {
    static const char line[] = "                       \n";
    int fd = openat(dir_fd, file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd >= 0) {
        if (write(fd, line, sizeof line - 1) < 0) { /* full: write_line falls back to a symlink */ }
        close(fd);
    }
}

static void pwrite_all(int fd, const char *p, size_t n, off_t off) {
    while (n > 0) {
        ssize_t w = pwrite(fd, p, n, off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return; /* a full disk: these bytes are lost, the pipe is still drained */
        p += w, n -= (size_t)w, off += w;
    }
}

/* Bytes read from a job's stream: the head part goes to the log, the rest into the ring. */
static void keep(struct stream *s, const char *p, size_t n) {
    if (s->seen < head_cap) {
        size_t h = n < head_cap - s->seen ? n : (size_t)(head_cap - s->seen);
        if (s->log >= 0)
            pwrite_all(s->log, p, h, (off_t)s->seen);
        s->seen += h, p += h, n -= h;
    }
    if (n == 0)
        return;
    if (!s->over) { /* the first byte past the head: only now does the stream go over */
        s->over = 1;
        s->ring = tail_cap ? open_in(s->name, "ring", O_CREAT | O_TRUNC) : -1;
        s->count = open_in(s->name, "count", O_CREAT | O_TRUNC);
    }
    unsigned long long past = s->seen - head_cap;
    if (s->ring >= 0) {
        /* Only the last tail_cap bytes of this chunk can survive it. */
        if (n > tail_cap) {
            past += n - tail_cap, p += n - tail_cap, n = (size_t)tail_cap;
        }
        size_t at = (size_t)(past % tail_cap);
        size_t first = n < tail_cap - at ? n : tail_cap - at;
        pwrite_all(s->ring, p, first, (off_t)at);
        pwrite_all(s->ring, p + first, n - first, 0);
        past += n;
    } else {
        past += n;
    }
    s->seen = head_cap + past;
    /* Written after the ring, so a reader never finds the count ahead of the bytes. */
    char line[32];
    int len = snprintf(line, sizeof line, "%llu bytes\n", past);
    if (s->count >= 0)
        pwrite_all(s->count, line, (size_t)len, 0);
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void close_from(int lowest) {
#ifdef SYS_close_range
    if (syscall(SYS_close_range, lowest, ~0U, 0) == 0)
        return;
#endif
    long max = sysconf(_SC_OPEN_MAX);
    for (int fd = lowest; fd < (max > 0 && max < 65536 ? max : 65536); fd++)
        close(fd);
}

/* The job's environment: the monitor's, with its run markers under the job's names. The
 * monitor keeps WKM_RUN itself (its /proc environ is what the runner's stray search reads:
 * a process carrying it is a monitor, never a job's stray). */
static char **job_env(void) {
    size_t n = 0;
    while (environ[n])
        n++;
    char **env = calloc(n + 3, sizeof *env);
    if (!env)
        die("calloc");
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (strncmp(environ[i], "WKM_RUN=", 8) && strncmp(environ[i], "WKM_RUNNER=", 11) &&
            strncmp(environ[i], "WATCHKEEPER_RUN_ID=", 19) && strncmp(environ[i], "WATCHKEEPER_RUNNER_ID=", 22))
            env[k++] = environ[i];
    const char *run = getenv("WKM_RUN"), *runner = getenv("WKM_RUNNER");
    if (asprintf(&env[k++], "WATCHKEEPER_RUN_ID=%s", run ? run : "") < 0 ||
        asprintf(&env[k++], "WATCHKEEPER_RUNNER_ID=%s", runner ? runner : "") < 0)
        die("asprintf");
    env[k] = NULL;
    return env;
}

int main(int argc, char **argv) {
    if (argc < 7) {
        dprintf(2, "usage: " NAME " FOLDER HEAD TAIL TIMEOUT GRACE JOB-ARGV...\n");
        return 125;
    }
    head_cap = strtoull(argv[2], NULL, 10);
    tail_cap = strtoull(argv[3], NULL, 10);
    double timeout = strtod(argv[4], NULL), grace = strtod(argv[5], NULL);
    char **job = argv + 6;

    /* The runner may stop, crash or be upgraded: its terminal's hangup and its end of our
     * stdout going away must not end the monitor (it has its session from the runner). */
    struct sigaction ign = {.sa_handler = SIG_IGN}, hup0, pipe0;
    sigaction(SIGHUP, &ign, &hup0);
    sigaction(SIGPIPE, &ign, &pipe0);

    close_from(3);
    int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (null < 0)
        die("/dev/null");
    dup2(null, 0);
    dir_fd = open(argv[1], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir_fd < 0)
        die(argv[1]);
    /* Without monitor.pid (no inode left: not even a symlink fits) a runner taking over could
     * not tell the run is monitored and would orphan it: refuse to start the job instead (the
     * runner records a failed start). */
    if (!write_line("monitor.pid", getpid()))
        die("cannot record monitor.pid in the run's folder");

    struct stream s[2] = {{"stdout", -1, -1, -1, -1, 0, 0}, {"stderr", -1, -1, -1, -1, 0, 0}};
    int out[2][2], chld[2];
    for (int i = 0; i < 2; i++) {
        if (pipe2(out[i], O_CLOEXEC) < 0)
            die("pipe");
    }
    if (pipe2(chld, O_CLOEXEC | O_NONBLOCK) < 0)
        die("pipe");
    chld_w = chld[1];
    struct sigaction sa = {.sa_handler = on_chld, .sa_flags = SA_RESTART | SA_NOCLDSTOP};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGCHLD, &sa, NULL);
    char **env = job_env();

    pid_t pid = fork();
    if (pid < 0)
        die("fork");
    if (pid == 0) {
        setpgid(0, 0); /* also done by the parent: whichever runs first makes the group */
        struct sigaction dfl = {.sa_handler = SIG_DFL};
        sigaction(SIGCHLD, &dfl, NULL);
        sigaction(SIGINT, &dfl, NULL);  /* a shell's background job would have these two */
        sigaction(SIGQUIT, &dfl, NULL); /* ignored; a job gets them as a terminal would */
        sigaction(SIGHUP, &hup0, NULL);
        sigaction(SIGPIPE, &pipe0, NULL);
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        dup2(out[0][1], 1);
        dup2(out[1][1], 2);
        close_from(3); /* the job gets stdin, stdout, stderr and nothing else */
        environ = env;
        execvp(job[0], job);
        int err = errno;
        dprintf(2, NAME ": %s: %s\n", job[0], strerror(err));
        _exit(err == ENOENT ? 127 : 126); /* what sh reports for a command it cannot run */
    }
    /* Fails only when the child ran first (exec'd or even exited): it made the group itself. */
    if (setpgid(pid, pid) < 0) { /* nothing to do */ }
    close(out[0][1]);
    close(out[1][1]);
    s[0].in = out[0][0];
    s[1].in = out[1][0];
    printf("%d\n", (int)pid);
    fflush(stdout);
    dup2(null, 1); /* the runner's pipe: nothing more for it, and it may be gone */
    write_line("job.pid", pid);
    blank("exit");
    for (int i = 0; i < 2; i++) /* -1: the head is lost, the pipe still drained */
        s[i].log = open_in(s[i].name, "log", O_CREAT | O_TRUNC);

    double deadline = timeout > 0 ? now() + timeout : 0, kill_at = 0;
    int status = -1; /* the job's, as a shell's $? */
    struct pollfd pf[3] = {{chld[0], POLLIN, 0}, {s[0].in, POLLIN, 0}, {s[1].in, POLLIN, 0}};
    while (status < 0 || s[0].in >= 0 || s[1].in >= 0) {
        int wait_ms = -1;
        if (status < 0 && deadline > 0) {
            double t = now(), next = kill_at > 0 ? kill_at : deadline;
            if (t >= next) {
                if (kill_at == 0) {
                    /* Marked before the signal, so whoever records the end says timed out. */
                    int fd = openat(dir_fd, "timed_out", O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
                    if (fd >= 0)
                        close(fd);
                    kill(-pid, SIGTERM);
                    kill_at = t + grace;
                    continue;
                }
                kill(-pid, SIGKILL);
                deadline = 0; /* nothing more to send */
                continue;
            }
            wait_ms = (int)((next - t) * 1000) + 1;
        }
        pf[1].fd = s[0].in, pf[2].fd = s[1].in; /* a negative fd is skipped by poll */
        if (poll(pf, 3, wait_ms) < 0) {
            if (errno == EINTR)
                continue;
            die("poll");
        }
        if (pf[0].revents) {
            while (read(chld[0], buf, sizeof buf) > 0)
                ;
            int st;
            pid_t got;
            while ((got = waitpid(pid, &st, WNOHANG)) < 0 && errno == EINTR)
                ;
            if (got == pid) {
                status = WIFSIGNALED(st) ? 128 + WTERMSIG(st) : WEXITSTATUS(st);
                /* From here on the job's pid may be reused: no signal is sent after this. */
                write_line("exit", status);
            }
        }
        for (int i = 0; i < 2; i++) {
            if (s[i].in < 0 || !pf[i + 1].revents)
                continue;
            ssize_t n = read(s[i].in, buf, sizeof buf);
            if (n > 0) {
                keep(&s[i], buf, (size_t)n);
            } else if (n == 0 || errno != EINTR) {
                /* The end of the stream: every writer (the job and whatever it started that
                 * kept the pipe) has closed it. */
                close(s[i].in);
                s[i].in = -1;
            }
        }
    }
    return status;
}
