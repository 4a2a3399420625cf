// The check program's harness for Java, compiled with the candidate and the generated checks (RdChecks.java) inside
// the sandbox. Each check is a `Check` that returns {what came back, what was expected}; `run` runs each one in a
// thread of its own and stops it at its time limit, and writes one line per check to the report descriptor (the
// sandbox's driver made it this program's stdout; what the candidate prints is dropped) in the Python harness's
// format:
//   {"loaded": True} | {"i": 0, "status": "passed", "got": "..."}
// Values compare as Objects.equals does, except numbers (by value across Long, Integer..., within 1e-6 relative or
// 1e-9 absolute when either is floating), lists and arrays (element by element), maps and Optionals.
package rdharness;

import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.io.PrintStream;
import java.lang.reflect.Array;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;

public final class Harness {
  /** One check: {got, expected} (expected is ignored for a truthy check). */
  public interface Check {
    Object[] run() throws Throwable;
  }

  private Harness() {}

  static String quote(String text) {
    StringBuilder out = new StringBuilder("\"");
    for (char c : text.toCharArray()) {
      if (c == '"' || c == '\\') out.append('\\').append(c);
      else if (c == '\n') out.append("\\n");
      else if (c == '\t') out.append("\\t");
      else if (c < 0x20 || c == 0x7f) out.append(String.format("\\x%02x", (int) c));
      else if (Character.isSurrogate(c)) out.append(String.format("\\u%04x", (int) c));
      else out.append(c);
    }
    return out.append('"').toString();
  }

  static String cut(String text) {
    return text.length() <= 300 ? text : text.substring(0, 297) + "...";
  }

  static String show(Object value) {
    return show(value, 0);
  }

  static String show(Object value, int depth) {
    if (value == null) return "null";
    if (value instanceof String) return quote((String) value);
    if (value instanceof Character) return "'" + value + "'";
    if (depth > 4) return "...";
    if (value instanceof Optional) {
      Optional<?> optional = (Optional<?>) value;
      return optional.isPresent() ? "Optional.of(" + show(optional.get(), depth + 1) + ")" : "Optional.empty()";
    }
    List<String> items = new ArrayList<>();
    if (value instanceof Map) {
      for (Map.Entry<?, ?> entry : ((Map<?, ?>) value).entrySet()) {
        items.add(show(entry.getKey(), depth + 1) + "=" + show(entry.getValue(), depth + 1));
      }
      return "{" + String.join(", ", items) + "}";
    }
    Iterator<?> elements = elements(value);
    if (elements == null) return String.valueOf(value);
    while (elements.hasNext() && items.size() < 50) items.add(show(elements.next(), depth + 1));
    return "[" + String.join(", ", items) + (elements.hasNext() ? ", ...]" : "]");
  }

  static Iterator<?> elements(Object value) {
    if (value instanceof Iterable) return ((Iterable<?>) value).iterator();
    if (value != null && value.getClass().isArray()) {
      List<Object> items = new ArrayList<>();
      for (int i = 0; i < Array.getLength(value); i++) items.add(Array.get(value, i));
      return items.iterator();
    }
    return null;
  }

  static boolean close(double a, double b) {
    if (a == b || (Double.isNaN(a) && Double.isNaN(b))) return true;
    return Math.abs(a - b) <= Math.max(1e-6 * Math.max(Math.abs(a), Math.abs(b)), 1e-9);
  }

  static boolean floating(Number n) {
    return n instanceof Double || n instanceof Float;
  }

  static boolean same(Object got, Object want) {
    if (got instanceof Number && want instanceof Number) {
      Number g = (Number) got, w = (Number) want;
      return floating(g) || floating(w) ? close(g.doubleValue(), w.doubleValue()) : g.longValue() == w.longValue();
    }
    if (got instanceof Optional && want instanceof Optional) {
      Optional<?> g = (Optional<?>) got, w = (Optional<?>) want;
      return g.isPresent() == w.isPresent() && (!g.isPresent() || same(g.get(), w.get()));
    }
    if (got instanceof Map && want instanceof Map) {
      Map<?, ?> g = (Map<?, ?>) got, w = (Map<?, ?>) want;
      if (!g.keySet().equals(w.keySet())) return false;
      for (Object key : g.keySet()) if (!same(g.get(key), w.get(key))) return false;
      return true;
    }
    boolean sequences = (got instanceof List || (got != null && got.getClass().isArray()))
        && (want instanceof List || (want != null && want.getClass().isArray()));
    if (sequences) {
      Iterator<?> g = elements(got), w = elements(want);
      while (g.hasNext() && w.hasNext()) if (!same(g.next(), w.next())) return false;
      return !g.hasNext() && !w.hasNext();
    }
    return Objects.equals(got, want);
  }

  static String describe(Throwable err) {
    String message = err.getMessage();
    return err.getClass().getName() + (message == null ? "" : ": " + message);
  }

  /** Runs one check in a thread of its own: {status, got}. */
  @SuppressWarnings("deprecation")
  static String[] one(Check check, boolean truthy, long limitMs) throws InterruptedException {
    String[][] outcome = {null};
    Thread thread = new Thread(null, () -> {
      try {
        Object[] values = check.run();
        boolean passed = truthy ? Boolean.TRUE.equals(values[0]) : same(values[0], values[1]);
        outcome[0] = new String[] {passed ? "passed" : "failed", show(values[0])};
      } catch (ThreadDeath stopped) {
        throw stopped;
      } catch (Throwable err) {
        outcome[0] = new String[] {"error", describe(err)};
      }
    }, "check", 16L << 20);
    thread.setDaemon(true);
    try {
      thread.start();
    } catch (OutOfMemoryError err) {
      return new String[] {"error", "the check could not start: " + describe(err)};
    }
    thread.join(limitMs);
    if (thread.isAlive()) {
      try {
        thread.stop(); // deprecated, and gone after Java 19: there a looping check goes on as a daemon thread
      } catch (UnsupportedOperationException gone) {
        // nothing to do: the next check runs beside it
      }
      return new String[] {"timeout", "no answer within " + (limitMs / 1000.0) + " s"};
    }
    return outcome[0] != null ? outcome[0] : new String[] {"error", "the check ended without an answer"};
  }

  public static void run(Check[] checks, boolean[] truthy, long limitMs) throws IOException, InterruptedException {
    OutputStream report = new FileOutputStream(FileDescriptor.out);
    System.setOut(new PrintStream(OutputStream.nullOutputStream()));
    report.write("{\"loaded\": True}\n".getBytes(StandardCharsets.UTF_8));
    for (int i = 0; i < checks.length; i++) {
      String[] outcome = one(checks[i], truthy[i], limitMs);
      String line = "{\"i\": " + i + ", \"status\": " + quote(outcome[0]) + ", \"got\": " + quote(cut(outcome[1])) + "}\n";
      report.write(line.getBytes(StandardCharsets.UTF_8));
      report.flush();
    }
    report.close();
    System.exit(0);
  }
}
