// The check program's harness for C++, compiled after the candidate inside the sandbox. Each check is a function
// `bool check(std::string& got)` that the generated checks.cpp defines; `__rd::run` runs each one in a child
// process of its own (fork), so a check that loops is killed at its time limit and one that crashes is that check's
// error, and writes one line per check to the report descriptor in the Python harness's format:
//   {"loaded": True} | {"i": 0, "status": "passed", "got": "..."}
// Values compare with ==, except numbers (within 1e-6 relative or 1e-9 absolute when either is floating),
// containers (element by element), tuples and pairs (member by member) and optionals. It is the first thing the
// unit includes (so that it can be precompiled): the candidate sees the standard headers it includes.
#ifndef RD_CHECK_HPP
#define RD_CHECK_HPP
#include <cxxabi.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <initializer_list>
#include <iomanip>
#include <iterator>
#include <limits>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <typeinfo>
#include <utility>

namespace __rd {

template <class T, class = void>
struct is_range : std::false_type {};
template <class T>
struct is_range<T, std::void_t<decltype(std::begin(std::declval<const T&>())), decltype(std::end(std::declval<const T&>()))>>
    : std::true_type {};
template <class T, class = void>
struct is_tuple : std::false_type {};
template <class T>
struct is_tuple<T, std::void_t<decltype(std::tuple_size<T>::value)>> : std::true_type {};
template <class T>
struct is_optional : std::false_type {};
template <class T>
struct is_optional<std::optional<T>> : std::true_type {};
template <class T, class = void>
struct printable : std::false_type {};
template <class T>
struct printable<T, std::void_t<decltype(std::declval<std::ostream&>() << std::declval<const T&>())>> : std::true_type {};
template <class T>
constexpr bool is_text = std::is_convertible_v<const T&, std::string_view>;

inline std::string quote(std::string_view text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\x%02x", c);
      out += escaped;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

template <class T>
std::string show(const T& value);

template <class T, std::size_t... I>
std::string show_members(const T& value, std::index_sequence<I...>) {
  std::string out;
  ((out += (I ? ", " : "") + show(std::get<I>(value))), ...);
  return "{" + out + "}";
}

template <class T>
std::string show(const T& value) {
  using D = std::decay_t<T>;
  if constexpr (std::is_same_v<D, bool>) {
    return value ? "true" : "false";
  } else if constexpr (std::is_same_v<D, char>) {
    return "'" + std::string(1, value) + "'";
  } else if constexpr (std::is_arithmetic_v<D>) {
    std::ostringstream out;
    out << std::setprecision(std::numeric_limits<D>::digits10) << value;
    return out.str();
  } else if constexpr (is_text<D>) {
    return quote(std::string_view(value));
  } else if constexpr (std::is_same_v<D, std::nullopt_t>) {
    return "std::nullopt";
  } else if constexpr (is_optional<D>::value) {
    return value ? show(*value) : "std::nullopt";
  } else if constexpr (is_range<D>::value) {
    std::string out;
    std::size_t n = 0;
    for (const auto& item : value) {
      if (n++ == 50) return "{" + out + ", ...}";
      out += (n > 1 ? ", " : "") + show(item);
    }
    return "{" + out + "}";
  } else if constexpr (is_tuple<D>::value) {
    return show_members(value, std::make_index_sequence<std::tuple_size<D>::value>());
  } else if constexpr (printable<D>::value) {
    std::ostringstream out;
    out << value;
    return out.str();
  } else {
    return "<a value that cannot be shown>";
  }
}

inline bool close(double a, double b) {
  if (a == b || (std::isnan(a) && std::isnan(b))) return true;
  return std::fabs(a - b) <= std::fmax(1e-6 * std::fmax(std::fabs(a), std::fabs(b)), 1e-9);
}

template <class A, class B>
bool same(const A& got, const B& want);

template <class A, class B, std::size_t... I>
bool same_members(const A& got, const B& want, std::index_sequence<I...>) {
  return (same(std::get<I>(got), std::get<I>(want)) && ...);
}

template <class A, class B>
bool same(const A& got, const B& want) {
  using X = std::decay_t<A>;
  using Y = std::decay_t<B>;
  if constexpr (std::is_arithmetic_v<X> && std::is_arithmetic_v<Y>) {
    if constexpr (std::is_floating_point_v<X> || std::is_floating_point_v<Y>) {
      return close(static_cast<double>(got), static_cast<double>(want));
    } else {
      return got == want;
    }
  } else if constexpr (is_optional<X>::value && std::is_same_v<Y, std::nullopt_t>) {
    return !got.has_value();
  } else if constexpr (is_optional<X>::value && is_optional<Y>::value) {
    return got.has_value() == want.has_value() && (!got || same(*got, *want));
  } else if constexpr (is_optional<X>::value) {
    return got.has_value() && same(*got, want);
  } else if constexpr (is_text<X> || is_text<Y>) {
    return got == want;
  } else if constexpr (is_range<X>::value && is_range<Y>::value) {
    auto g = std::begin(got);
    auto w = std::begin(want);
    for (; g != std::end(got) && w != std::end(want); ++g, ++w) {
      if (!same(*g, *w)) return false;
    }
    return g == std::end(got) && w == std::end(want);
  } else if constexpr (is_tuple<X>::value && is_tuple<Y>::value) {
    if constexpr (std::tuple_size<X>::value != std::tuple_size<Y>::value) {
      return false;
    } else {
      return same_members(got, want, std::make_index_sequence<std::tuple_size<X>::value>());
    }
  } else {
    return got == want;
  }
}

inline std::string cut(const std::string& text) { return text.size() <= 300 ? text : text.substr(0, 297) + "..."; }

inline void send(int fd, const std::string& line) {
  for (std::size_t done = 0; done < line.size();) {
    ssize_t n = ::write(fd, line.data() + done, line.size() - done);
    if (n <= 0) return;
    done += static_cast<std::size_t>(n);
  }
}

inline std::string exception_text(const std::exception& err) {
  int status = 0;
  char* name = abi::__cxa_demangle(typeid(err).name(), nullptr, nullptr, &status);
  std::string text = std::string(status == 0 && name ? name : typeid(err).name()) + ": " + err.what();
  std::free(name);
  return text;
}

using Check = bool (*)(std::string&);

// In the child: the check's answer, "status\tgot", on `answer`.
[[noreturn]] inline void answer(Check check, int answer_fd) {
  std::string got, status;
  try {
    status = check(got) ? "passed" : "failed";
  } catch (const std::exception& err) {
    status = "error";
    got = exception_text(err);
  } catch (...) {
    status = "error";
    got = "an exception that is not a std::exception was thrown";
  }
  send(answer_fd, status + "\t" + cut(got));
  ::_exit(0);
}

// In the parent: what the child said within `limit_ms`, or why it said nothing.
inline std::pair<std::string, std::string> await_answer(pid_t pid, int answer_fd, int limit_ms) {
  using clock = std::chrono::steady_clock;
  auto deadline = clock::now() + std::chrono::milliseconds(limit_ms);
  std::string said;
  bool ended = false;
  while (!ended) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now()).count();
    if (left <= 0) break;
    pollfd waiting{answer_fd, POLLIN, 0};
    if (::poll(&waiting, 1, static_cast<int>(left)) <= 0) continue;
    char chunk[512];
    ssize_t n = ::read(answer_fd, chunk, sizeof chunk);
    if (n <= 0) ended = true;
    else if (said.size() < 4096) said.append(chunk, static_cast<std::size_t>(n));
  }
  if (!ended) {
    ::kill(-pid, SIGKILL);
    ::kill(pid, SIGKILL);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (!ended) return {"timeout", "no answer within " + show(limit_ms / 1000.0) + " s"};
  auto tab = said.find('\t');
  if (tab != std::string::npos) return {said.substr(0, tab), said.substr(tab + 1)};
  if (WIFSIGNALED(status)) return {"error", std::string("the check crashed: ") + ::strsignal(WTERMSIG(status))};
  return {"error", "the check ended (exit status " + std::to_string(WEXITSTATUS(status)) + ") without an answer"};
}

inline int run(std::initializer_list<Check> checks, int limit_ms) {
  const char* fd_text = std::getenv("REPORT_FD");
  int report = fd_text ? std::atoi(fd_text) : 1;
  send(report, "{\"loaded\": True}\n");
  int index = 0;
  for (Check check : checks) {
    int pipe_fds[2];
    std::pair<std::string, std::string> outcome{"error", "the check could not start (no pipe)"};
    if (::pipe(pipe_fds) == 0) {
      std::fflush(nullptr);
      pid_t pid = ::fork();
      if (pid == 0) {
        ::setpgid(0, 0);
        ::close(pipe_fds[0]);
        answer(check, pipe_fds[1]);
      }
      if (pid > 0) ::setpgid(pid, pid);  // as the child does: whichever runs first, the group exists for kill()
      ::close(pipe_fds[1]);
      outcome = pid < 0 ? std::make_pair(std::string("error"), std::string("the check could not start (fork failed)"))
                        : await_answer(pid, pipe_fds[0], limit_ms);
      ::close(pipe_fds[0]);
    }
    send(report, "{\"i\": " + std::to_string(index++) + ", \"status\": " + quote(outcome.first) +
                     ", \"got\": " + quote(cut(outcome.second)) + "}\n");
  }
  return 0;
}

}  // namespace __rd

#endif  // RD_CHECK_HPP
