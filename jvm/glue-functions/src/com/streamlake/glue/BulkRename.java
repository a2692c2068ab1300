package com.streamlake.glue;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;

/**
 * Moves many single files through the Hadoop FileSystem API in one call from Python (glue_jobs/lake/storage.py
 * HadoopStorage.rename_files, the publish of a batch's staged files): each target directory is made once, then each
 * move, a few threads at a time, refuses an existing target and never overwrites. From Python every move was four py4j
 * round trips (and a connection per Python thread); here the whole publish is one.
 *
 * <p>What it relies on is the Hadoop FileSystem specification (hadoop-common filesystem/filesystem.md;
 * https://hadoop.apache.org/docs/r3.3.6/hadoop-project-dist/hadoop-common/filesystem/filesystem.html):
 * {@code boolean mkdirs(Path p)} makes the directory and its parents and succeeds when it exists already;
 * {@code boolean exists(Path p)}; {@code boolean rename(Path src, Path d)}, whose result false or an IOException both
 * mean the move did not happen as asked. "Renaming a file atop an existing file is specified as failing", but "Local
 * FileSystem: the rename succeeds; the destination file is replaced by the source file" and HDFS returns false (the
 * specification's "Destination exists and is a file"), so an existing target is refused before the rename, as the
 * Python side did; a missing source "should" raise FileNotFoundException (HDFS returns false: also a failure here).
 * Only that API is used (present in Glue 4.0's Hadoop 3.3 and every later line); compiled with
 * {@code javac --release 8}.
 *
 * <p>Moves and result are plain strings, each one py4j transfer: a Python list would be converted element by element.
 */
public final class BulkRename {
    public static final char RENAMED = 'R';
    public static final char EXISTS = 'E';
    public static final char FAILED = 'F';

    private BulkRename() {
    }

    /**
     * Move each of {@code moves} (lines "&lt;source&gt;\t&lt;target&gt;", separated by '\n'), {@code threads} at a time,
     * after making every target's directory, and say what happened to each.
     *
     * @return one character per move, in order ({@link #RENAMED}; {@link #EXISTS}: the target existed, nothing was
     *     moved; {@link #FAILED}: rename returned false or something threw, its directory's mkdirs included), then for
     *     each failure a line "&lt;index&gt;\t&lt;what failed&gt;". Every move is tried, whatever fails.
     */
    public static String rename(final Configuration conf, String moves, int threads) throws InterruptedException {
        final String[] lines = moves.isEmpty() ? new String[0] : moves.split("\n", -1);
        final Path[] sources = new Path[lines.length];
        final Path[] targets = new Path[lines.length];
        final char[] outcome = new char[lines.length];
        final String[] errors = new String[lines.length];
        for (int i = 0; i < lines.length; i++) {
            int tab = lines[i].indexOf('\t');
            if (tab < 0 || lines[i].indexOf('\t', tab + 1) >= 0) {
                throw new IllegalArgumentException("move " + i + " is not \"<source>\\t<target>\": " + lines[i]);
            }
            sources[i] = new Path(lines[i].substring(0, tab));
            targets[i] = new Path(lines[i].substring(tab + 1));
        }
        // Each target directory once, in the order first named; the map is only read once the threads start.
        final Map<Path, Integer> parents = new LinkedHashMap<Path, Integer>();
        for (Path target : targets) {
            if (!parents.containsKey(target.getParent())) {
                parents.put(target.getParent(), parents.size());
            }
        }
        final List<Path> directories = new ArrayList<Path>(parents.keySet());
        final String[] directoryErrors = new String[directories.size()];
        BulkThreads.run(directories.size(), threads, "streamlake-bulk-rename", new BulkThreads.Task() {
            @Override
            public void run(int index) {
                Path directory = directories.get(index);
                try {
                    FileSystem fs = directory.getFileSystem(conf);  // FileSystem's cache: one per scheme and authority
                    if (!fs.mkdirs(directory)) {
                        directoryErrors[index] = "mkdirs " + directory + " returned false";
                    }
                } catch (Exception | LinkageError failure) {
                    directoryErrors[index] = "mkdirs " + directory + ": " + BulkThreads.describe(failure);
                }
            }
        });
        BulkThreads.run(lines.length, threads, "streamlake-bulk-rename", new BulkThreads.Task() {
            @Override
            public void run(int index) {
                String directoryFailure = directoryErrors[parents.get(targets[index].getParent())];
                if (directoryFailure != null) {
                    outcome[index] = FAILED;
                    errors[index] = directoryFailure;
                    return;
                }
                try {
                    FileSystem fs = targets[index].getFileSystem(conf);
                    if (fs.exists(targets[index])) {
                        outcome[index] = EXISTS;
                        errors[index] = "refusing to overwrite " + targets[index];
                    } else if (fs.rename(sources[index], targets[index])) {
                        outcome[index] = RENAMED;
                    } else {
                        outcome[index] = FAILED;
                        errors[index] = "rename " + sources[index] + " -> " + targets[index] + " failed";
                    }
                } catch (Exception | LinkageError failure) {
                    outcome[index] = FAILED;
                    errors[index] = "rename " + sources[index] + " -> " + targets[index] + ": " + BulkThreads.describe(failure);
                }
            }
        });
        StringBuilder result = new StringBuilder(lines.length + 16).append(outcome);
        for (int i = 0; i < lines.length; i++) {
            if (errors[i] != null) {
                result.append('\n').append(i).append('\t').append(errors[i].replace('\n', ' ').replace('\t', ' '));
            }
        }
        return result.toString();
    }
}
