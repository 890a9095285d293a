// The script's C clocks under `gpemu torch --clock virtual` (issue 28): a
// library that `gpemu torch` preloads (LD_PRELOAD) into the script's process.
// It interposes clock_gettime, gettimeofday, time, nanosleep, clock_nanosleep,
// usleep and sleep. Until gpemu_torch/_clock.py attaches it to the backend's
// emulated clock it passes every call through; attached, a call made from the
// script's own compiled code (a shared object of its own: a C extension or a
// ctypes library outside the system's and the Python installation's folders)
// reads the host's emulated time, and a sleep in the script's main thread moves
// it on at once, as time.time and time.sleep do in Python. Calls from
// everything else keep the real clocks: the interpreter, glibc, torch, gloo and
// gpemu compute their timed waits from the same calls and wait for them in the
// kernel's real time (docs/decisions.md, "The script's C clocks").
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>

namespace {

using NowFn = long long (*)();
using AdvanceFn = void (*)(long long);

std::atomic<NowFn> g_now{nullptr};
std::atomic<AdvanceFn> g_advance{nullptr};
long long g_base_realtime = 0, g_base_monotonic = 0;
std::string g_gpemu_dir;  // gpemu's own objects (the backend's folder)

std::mutex g_mutex;
std::unordered_map<const void*, bool> g_call_sites;  // return address -> the script's own code

template <typename F>
F real(const char* name) {
  return reinterpret_cast<F>(dlsym(RTLD_NEXT, name));
}

std::string canonical(const char* path) {
  char buf[PATH_MAX];
  return path && ::realpath(path, buf) ? std::string(buf) : std::string(path ? path : "");
}

bool library_path(const std::string& p) {
  static const char* const prefixes[] = {"/usr/lib",       "/usr/lib64", "/lib", "/lib64",
                                         "/usr/local/lib", "/usr/bin",   "/bin", "/usr/sbin"};
  for (const char* prefix : prefixes)
    if (p.compare(0, std::strlen(prefix), prefix) == 0) return true;
  return p.empty() || p.find("-packages/") != std::string::npos || p.find("linux-vdso") != std::string::npos ||
         (!g_gpemu_dir.empty() && p.compare(0, g_gpemu_dir.size(), g_gpemu_dir) == 0);
}

// Whether the code at `caller` is the script's own compiled code. Known call
// sites are looked up; a new one is classified by its object (dladdr, outside
// the lock: the loader's own lock may be held by a thread that reads a clock).
bool from_script(const void* caller) {
  {
    std::lock_guard lock(g_mutex);
    if (auto it = g_call_sites.find(caller); it != g_call_sites.end()) return it->second;
  }
  Dl_info info{};
  bool mine = false;
  if (dladdr(caller, &info) && info.dli_fname) {
    static const std::string self = canonical("/proc/self/exe");
    const std::string path = canonical(info.dli_fname);
    std::lock_guard lock(g_mutex);
    mine = path != self && !library_path(path);
  }
  std::lock_guard lock(g_mutex);
  g_call_sites.emplace(caller, mine);
  return mine;
}

bool emulated(clockid_t id) {
  return id == CLOCK_REALTIME || id == CLOCK_REALTIME_COARSE || id == CLOCK_MONOTONIC || id == CLOCK_MONOTONIC_COARSE ||
         id == CLOCK_MONOTONIC_RAW || id == CLOCK_BOOTTIME;
}

long long emulated_ns(clockid_t id, NowFn now) {
  const bool wall = id == CLOCK_REALTIME || id == CLOCK_REALTIME_COARSE;
  return (wall ? g_base_realtime : g_base_monotonic) + now();
}

bool main_thread() { return ::syscall(SYS_gettid) == ::getpid(); }

// A sleep of `ns` in the script's main thread: the emulated time moves on.
bool advance(const void* caller, long long ns) {
  const AdvanceFn adv = g_advance.load(std::memory_order_acquire);
  if (!adv || !main_thread() || !from_script(caller)) return false;
  if (ns > 0) adv(ns);
  return true;
}

void detach() {
  g_now.store(nullptr, std::memory_order_release);
  g_advance.store(nullptr, std::memory_order_release);
}

}  // namespace

extern "C" {

// Called once by gpemu_torch/_clock.py: `backend` is the loaded _backend.so
// (its gpemu_torch_now_ns / gpemu_torch_advance_ns), the bases are the real
// readings the emulated time is offset by (the Python clocks' own). Returns 0,
// or -1 when the backend's functions are not there (nothing is attached).
__attribute__((visibility("default"))) int gpemu_clock_shim_attach(const char* backend, long long base_realtime,
                                                                   long long base_monotonic) {
  void* handle = dlopen(backend, RTLD_NOW | RTLD_NOLOAD);
  if (!handle) return -1;
  auto now = reinterpret_cast<NowFn>(dlsym(handle, "gpemu_torch_now_ns"));
  auto adv = reinterpret_cast<AdvanceFn>(dlsym(handle, "gpemu_torch_advance_ns"));
  if (!now || !adv) return -1;
  {
    std::lock_guard lock(g_mutex);
    const std::string dir = canonical(backend);
    g_gpemu_dir = dir.substr(0, dir.rfind('/') + 1);
    g_call_sites.clear();
  }
  g_base_realtime = base_realtime;
  g_base_monotonic = base_monotonic;
  static std::once_flag fork_handler;
  // A forked child (a DataLoader worker) does real work: the real clocks.
  std::call_once(fork_handler, [] { pthread_atfork(nullptr, nullptr, detach); });
  g_advance.store(adv, std::memory_order_release);
  g_now.store(now, std::memory_order_release);
  return 0;
}

__attribute__((visibility("default"))) int clock_gettime(clockid_t id, struct timespec* ts) {
  static const auto pass = real<int (*)(clockid_t, struct timespec*)>("clock_gettime");
  const NowFn now = g_now.load(std::memory_order_acquire);
  if (now && emulated(id) && from_script(__builtin_return_address(0))) {
    const long long t = emulated_ns(id, now);
    ts->tv_sec = t / 1'000'000'000;
    ts->tv_nsec = t % 1'000'000'000;
    return 0;
  }
  return pass(id, ts);
}

__attribute__((visibility("default"))) int gettimeofday(struct timeval* tv, void* tz) {
  static const auto pass = real<int (*)(struct timeval*, void*)>("gettimeofday");
  const NowFn now = g_now.load(std::memory_order_acquire);
  if (now && !tz && from_script(__builtin_return_address(0))) {
    const long long t = emulated_ns(CLOCK_REALTIME, now);
    tv->tv_sec = t / 1'000'000'000;
    tv->tv_usec = (t % 1'000'000'000) / 1000;
    return 0;
  }
  return pass(tv, tz);
}

__attribute__((visibility("default"))) time_t time(time_t* out) {
  static const auto pass = real<time_t (*)(time_t*)>("time");
  const NowFn now = g_now.load(std::memory_order_acquire);
  if (now && from_script(__builtin_return_address(0))) {
    const time_t t = static_cast<time_t>(emulated_ns(CLOCK_REALTIME, now) / 1'000'000'000);
    if (out) *out = t;
    return t;
  }
  return pass(out);
}

__attribute__((visibility("default"))) int nanosleep(const struct timespec* req, struct timespec* rem) {
  static const auto pass = real<int (*)(const struct timespec*, struct timespec*)>("nanosleep");
  if (req && req->tv_nsec >= 0 && req->tv_nsec < 1'000'000'000 && req->tv_sec >= 0 &&
      advance(__builtin_return_address(0), req->tv_sec * 1'000'000'000LL + req->tv_nsec)) {
    if (rem) *rem = {0, 0};
    return 0;
  }
  return pass(req, rem);
}

__attribute__((visibility("default"))) int clock_nanosleep(clockid_t id, int flags, const struct timespec* req,
                                                           struct timespec* rem) {
  static const auto pass = real<int (*)(clockid_t, int, const struct timespec*, struct timespec*)>("clock_nanosleep");
  const NowFn now = g_now.load(std::memory_order_acquire);
  if (now && req && emulated(id) && req->tv_nsec >= 0 && req->tv_nsec < 1'000'000'000) {
    long long ns = req->tv_sec * 1'000'000'000LL + req->tv_nsec;
    if (flags & TIMER_ABSTIME) ns -= emulated_ns(id, now);
    if (advance(__builtin_return_address(0), ns)) return 0;
  }
  return pass(id, flags, req, rem);
}

__attribute__((visibility("default"))) int usleep(useconds_t us) {
  static const auto pass = real<int (*)(useconds_t)>("usleep");
  if (advance(__builtin_return_address(0), static_cast<long long>(us) * 1000)) return 0;
  return pass(us);
}

__attribute__((visibility("default"))) unsigned int sleep(unsigned int s) {
  static const auto pass = real<unsigned int (*)(unsigned int)>("sleep");
  if (advance(__builtin_return_address(0), static_cast<long long>(s) * 1'000'000'000LL)) return 0;
  return pass(s);
}

}  // extern "C"
