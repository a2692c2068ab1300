package com.streamlake.glue;

import java.nio.charset.StandardCharsets;

import org.apache.hadoop.fs.FileStatus;

/**
 * A listing's FileStatus[] as text for Python (glue_jobs/lake/storage.py HadoopStorage._file_infos): per status one line
 * {@code <D|F>\t<length>\t<modification time>\t<path>\n}, in the array's order, from the four getters
 * {@code isDirectory()}, {@code getLen()}, {@code getModificationTime()} and {@code getPath()} of
 * org.apache.hadoop.fs.FileStatus (hadoop-common, every line Glue 4.0 and later ship) and nothing else.
 *
 * <p>About a quarter of the statuses' own text ({@code FileStatus.toString()} also prints replication, block size,
 * access time, owner, group, permission and flags), so four times as many statuses fit in one reply.
 *
 * <p>Why a reply at a time: py4j writes a reply through a {@code BufferedWriter} of the default 8,192 characters
 * (py4j.ClientServerConnection's constructor) on a socket none of its classes sets TCP_NODELAY on (the bytecode of
 * py4j 0.10.9.5, 0.10.9.7 and 0.10.9.9, what PySpark 3.3, 3.5 and 4.1 ship), so a longer reply leaves in two writes,
 * and Nagle's algorithm holds the second until the receiver acknowledges the first, which a receiver delays ("Interactions
 * between Nagle and delayed acknowledgments", Internet Core Protocols, O'Reilly:
 * https://www.oreilly.com/library/view/internet-core-protocols/1565925726/ch07s04s03s01.html; what it costs:
 * docs/performance.md, "Listing a batch's staged files"). A reply here stays under {@code budget} bytes, py4j's escapes
 * counted; the caller asks again from where it stopped.
 *
 * <p>The path comes last, so a tab in it stays in it; a newline in a path makes the caller's line count differ from
 * the reply's first line, and it then reads those statuses another way. Compiled with {@code javac --release 8}.
 */
public final class StatusLines {
    private StatusLines() {
    }

    /**
     * The statuses from index {@code from} on, as many as fit in {@code budget} bytes (at least one): a first line with
     * their count, then one line each.
     *
     * @param statuses a {@code FileStatus[]} (declared Object: py4j passes a Java array as it is, and matches it to an
     *     Object parameter whatever its element class)
     */
    public static String describe(Object statuses, int from, int budget) {
        FileStatus[] all = (FileStatus[]) statuses;
        StringBuilder lines = new StringBuilder(Math.min(budget, 1 << 16));
        int used = 16;  // the count's line and py4j's reply prefix
        int next = from;
        while (next < all.length) {
            FileStatus status = all[next];
            String line = (status.isDirectory() ? "D" : "F") + '\t' + status.getLen() + '\t' + status.getModificationTime()
                + '\t' + status.getPath().toString() + '\n';
            int cost = line.getBytes(StandardCharsets.UTF_8).length + escapes(line);
            if (next > from && used + cost > budget) {
                break;
            }
            lines.append(line);
            used += cost;
            next++;
        }
        return (next - from) + "\n" + lines;
    }

    /** The characters py4j writes as two (py4j.StringUtil.escape: backslash, newline, carriage return). */
    private static int escapes(String text) {
        int count = 0;
        for (int i = 0; i < text.length(); i++) {
            char c = text.charAt(i);
            if (c == '\\' || c == '\n' || c == '\r') {
                count++;
            }
        }
        return count;
    }
}
