// GoogleTest suite for src/io/checkpoint.cpp, saving: into a missing directory, the writability
// check (a read-only directory too), atomic replacement without leftovers, a failed save and a
// save killed mid-write leaving the previous file, the write hook seeing every chunk. Each test
// writes only into its own mkdtemp directory (unique per MPI rank).
#include "checkpoint_test_util.h"

namespace {

using namespace checkpoint_test;

TEST_F(CheckpointFile, SaveIntoMissingDirectoryCreatesNothing) {
  const std::string p = path("missing/ck.bin");
  try {
    nn::io::save_checkpoint(p, sample(3, 2, 2, false));
    ADD_FAILURE();
  } catch (const nn::UserError& e) {
    EXPECT_EQ(std::string(e.what()), p + ": cannot write checkpoint: No such file or directory");
  }
  EXPECT_TRUE(listing().empty());
}

TEST_F(CheckpointFile, CheckWritable) {
  EXPECT_NO_THROW(nn::io::check_writable(path("ck.bin")));
  const auto message = [](const std::string& p) -> std::string {
    try {
      nn::io::check_writable(p);
    } catch (const nn::UserError& e) {
      return e.what();
    }
    return "accepted";
  };
  EXPECT_EQ(message(path("missing/ck.bin")), "--save " + path("missing/ck.bin") + ": directory " +
                                                 path("missing") + " does not exist");
  EXPECT_EQ(message(dir_.string()), "--save " + dir_.string() + ": is a directory");
  write(path("file"), {1});
  EXPECT_EQ(message(path("file/ck.bin")),
            "--save " + path("file/ck.bin") + ": " + path("file") + " is not a directory");
  EXPECT_EQ(message(""), "--save: empty path");
  EXPECT_EQ(listing(), std::vector<std::string>{"file"});  // checking created nothing
}

// A directory nobody may write to (r-x for all). Root passes access(W_OK) whatever the mode
// bits say, so as root (CI) the two calls run in a child process that has become the user
// nobody; its exit status says what it saw.
TEST_F(CheckpointFile, CheckWritableRefusesReadOnlyDirectory) {
  using fs::perms;
  fs::create_directory(path("ro"));
  fs::permissions(path("ro"), perms::owner_read | perms::owner_exec | perms::group_read | perms::group_exec |
                                  perms::others_read | perms::others_exec);
  const auto refusals = [&] {  // bit 0: check_writable refused, bit 1: save_checkpoint refused
    int got = 0;
    try {
      nn::io::check_writable(path("ro/ck.bin"));
    } catch (const nn::UserError&) {
      got |= 1;
    }
    try {
      nn::io::save_checkpoint(path("ro/ck.bin"), sample(3, 2, 2, false));
    } catch (const nn::UserError&) {
      got |= 2;
    }
    return got;
  };
  if (::geteuid() != 0) {
    EXPECT_EQ(refusals(), 3);
  } else {
    // The test's directory is mkdtemp's 0700: nobody may pass through it to "ro".
    fs::permissions(fs::path(path("ro")).parent_path(), perms::group_exec | perms::others_exec, fs::perm_options::add);
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      if (::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(20);     // could not become nobody
      if (::access(path("ro").c_str(), R_OK | X_OK) != 0) ::_exit(21);   // cannot even see the directory
      ::_exit(refusals() == 3 ? 0 : 10 + refusals());
    }
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0) << "as nobody: 10 + the refusals seen (bit 0 check_writable, bit 1 save_checkpoint); "
                                         "20: setuid failed; 21: the directory was not reachable";
  }
  EXPECT_FALSE(fs::exists(path("ro/ck.bin")));
  fs::permissions(path("ro"), perms::owner_all);
}

TEST_F(CheckpointFile, ExistingFileIsReplacedWithoutLeftovers) {
  const Checkpoint a = sample(6, 3, 2, false), b = sample(8, 5, 4, true);
  nn::io::save_checkpoint(path("ck.bin"), a);
  nn::io::save_checkpoint(path("ck.bin"), b);
  expect_same(nn::io::load_checkpoint(path("ck.bin")), b);
  EXPECT_EQ(listing(), std::vector<std::string>{"ck.bin"});
}

// Two ways a save can fail once a checkpoint exists; each leaves it intact and leaves
// no temp file behind (and a stale temp file that must not make it fail). (A read-only directory would be the natural case, but the tests
// may run as root; these work for any user.)
TEST_F(CheckpointFile, FailedSaveLeavesTheOldFileIntact) {
  const Checkpoint old_ck = sample(6, 3, 2, false), new_ck = sample(6, 3, 2, true);
  const std::string p = path("ck.bin");
  nn::io::save_checkpoint(p, old_ck);

  // 1. Not a failure: a stale temp file left by a killed run (here under the pid-based
  //    name an earlier scheme used; pids are reused) does not block the save, and is not
  //    ours to delete.
  const std::string stale = p + ".tmp." + std::to_string(::getpid());
  fs::create_directory(stale);
  nn::io::save_checkpoint(p, new_ck);
  expect_same(nn::io::load_checkpoint(p), new_ck);
  EXPECT_TRUE(fs::is_directory(stale));
  fs::remove(stale);
  nn::io::save_checkpoint(p, old_ck);

  // 2. A write fails half-way: a 64-byte file size limit (EFBIG; SIGXFSZ ignored).
  rlimit saved{};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &saved), 0);
  const auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  rlimit small = saved;
  small.rlim_cur = 64;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  std::string msg;
  try {
    nn::io::save_checkpoint(p, new_ck);
  } catch (const nn::UserError& e) {
    msg = e.what();
  }
  ::setrlimit(RLIMIT_FSIZE, &saved);
  std::signal(SIGXFSZ, old_handler);
  EXPECT_EQ(msg, p + ": cannot write checkpoint: File too large");
  expect_same(nn::io::load_checkpoint(p), old_ck);
  EXPECT_EQ(listing(), std::vector<std::string>{"ck.bin"});

  // 3. The rename fails (the target is a non-empty directory): the temp file is removed.
  const std::string dir_target = path("target");
  fs::create_directories(dir_target + "/inside");
  EXPECT_THROW(nn::io::save_checkpoint(dir_target, new_ck), nn::UserError);
  EXPECT_EQ(listing(), (std::vector<std::string>{"ck.bin", "target"}));
}

// The test hook of a save that is about to be killed: SIGKILL (what the OOM killer or a
// batch system's time limit sends; nothing runs after it) once part of the file is written.
void die_mid_write(const std::string&, std::size_t written, std::size_t total) {
  if (written < total) ::raise(SIGKILL);
}

std::string describe_status(int status) {
  if (WIFSIGNALED(status)) return "killed by signal " + std::to_string(WTERMSIG(status));
  if (WIFEXITED(status)) return "exited with code " + std::to_string(WEXITSTATUS(status));
  return "status " + std::to_string(status);
}

// A process killed in the middle of writing a checkpoint over an existing one: the final
// name still holds the previous, complete checkpoint; the only other file is the killed
// save's temp file "<final>.tmp.XXXXXX". Saves do not remove such files: the same pattern
// names the temp file of a save still in progress (another rank, another job), so only the
// user can know it is stale. A later save succeeds regardless and leaves it alone.
// The save runs in a fork()ed child that does plain file I/O only (no MPI) and then dies;
// every rank does this in its own directory.
TEST_F(CheckpointFile, SaveKilledMidWriteLeavesThePreviousFile) {
  const std::string p = path("ck.bin");
  const Checkpoint old_ck = sample(6, 3, 2, false);
  nn::io::save_checkpoint(p, old_ck);
  const Checkpoint big = sample(784, 300, 10, true);  // 1.9 MB: two write() calls of at most 1 MiB
  ASSERT_GT(nn::io::encode_checkpoint(big).size(), std::size_t{1} << 20);

  std::fflush(nullptr);  // or the child's copy of buffered output could be printed twice
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0) << std::strerror(errno);
  if (pid == 0) {
    nn::io::set_checkpoint_write_hook(die_mid_write);
    try {
      nn::io::save_checkpoint(p, big);
    } catch (...) {
      ::_exit(3);
    }
    ::_exit(2);  // the save finished: the hook never fired
  }
  int status = 0;
  pid_t done = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while ((done = ::waitpid(pid, &status, WNOHANG)) == 0 && std::chrono::steady_clock::now() < deadline)
    ::usleep(10 * 1000);
  if (done == 0) {  // never hang the suite on a stuck child
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &status, 0);
    FAIL() << "the child did not finish within 60 s";
  }
  ASSERT_EQ(done, pid);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << describe_status(status);

  expect_same(nn::io::load_checkpoint(p), old_ck);
  const std::vector<std::string> names = listing();
  ASSERT_EQ(names.size(), 2u) << testing::PrintToString(names);
  EXPECT_EQ(names[0], "ck.bin");
  const std::string prefix = "ck.bin.tmp.";
  EXPECT_EQ(names[1].rfind(prefix, 0), 0u) << names[1];
  EXPECT_EQ(names[1].size(), prefix.size() + 6) << names[1];  // mkstemp's XXXXXX
  EXPECT_EQ(fs::file_size(path(names[1])), std::uintmax_t{1} << 20);  // killed after the first write

  nn::io::save_checkpoint(p, big);
  expect_same(nn::io::load_checkpoint(p), big);
  EXPECT_EQ(listing(), names);
}

// The hook sees every write of a save, in order, with the temp file's name, and is off again
// once reset; the saved file is the one the hook watched being written.
TEST_F(CheckpointFile, WriteHookSeesEveryChunkOfTheTempFile) {
  static std::vector<std::size_t> seen;
  static std::string tmp_seen;
  seen.clear();
  const auto previous = nn::io::set_checkpoint_write_hook(
      [](const std::string& tmp, std::size_t written, std::size_t) {
        seen.push_back(written);
        tmp_seen = tmp;
      });
  const Checkpoint big = sample(784, 300, 10, false);  // 0.96 MB: one write
  const Checkpoint bigger = sample(784, 300, 10, true);  // 1.9 MB: two writes
  nn::io::save_checkpoint(path("a.bin"), big);
  nn::io::save_checkpoint(path("b.bin"), bigger);
  const auto mine = nn::io::set_checkpoint_write_hook(previous);
  EXPECT_NE(mine, nullptr);
  const std::size_t na = nn::io::encode_checkpoint(big).size(),
                    nb = nn::io::encode_checkpoint(bigger).size();
  EXPECT_EQ(seen, (std::vector<std::size_t>{na, std::size_t{1} << 20, nb}));
  EXPECT_EQ(tmp_seen.rfind(path("b.bin") + ".tmp.", 0), 0u) << tmp_seen;
  nn::io::save_checkpoint(path("c.bin"), big);  // hook off again
  EXPECT_EQ(seen.size(), 3u);
}

}  // namespace
