package com.streamlake.glue;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;

/**
 * Deletes many single files through the Hadoop FileSystem API in one call from Python (glue_jobs/lake/storage.py
 * HadoopStorage.delete_files): a few threads, one {@code FileSystem.delete(path, false)} per path, so a partition of
 * thousands of small files costs one py4j round trip per chunk instead of several per file.
 *
 * <p>What it relies on is the contract of {@code boolean delete(Path p, boolean recursive)} in the Hadoop FileSystem
 * specification (hadoop-common filesystem/filesystem.md, "boolean delete(Path p, boolean recursive)";
 * https://hadoop.apache.org/docs/r3.3.6/hadoop-project-dist/hadoop-common/filesystem/filesystem.html): a path that
 * does not exist leaves the file system unchanged and the result SHOULD be false; a file is removed and the result is
 * true; a directory with children and {@code recursive == false} "cannot be deleted": IOException (HDFS:
 * PathIsNotEmptyDirectoryException). Deleting a file MUST be atomic. So {@code recursive} is always false here: nothing
 * under a directory is ever removed; a non-empty directory is reported as a failure, and an empty one is removed as
 * the specification says (callers pass files from a listing). Only that FileSystem API is used (present in Glue 4.0's
 * Hadoop 3.3 and every later line); compiled with {@code javac --release 8}.
 *
 * <p>Paths and result are plain strings, each one py4j transfer: a Python list would be converted element by element.
 */
public final class BulkDelete {
    public static final char DELETED = 'D';
    public static final char MISSING = 'M';
    public static final char FAILED = 'F';

    private BulkDelete() {
    }

    /**
     * Delete each of {@code paths} (separated by '\n'), {@code threads} at a time, and say what happened to each.
     *
     * @return one character per path, in order ({@link #DELETED}: it existed and was deleted; {@link #MISSING}: delete
     *     returned false, nothing was there; {@link #FAILED}: delete threw), then for each failure a line
     *     "&lt;index&gt;\t&lt;exception class&gt;: &lt;message&gt;". Every path is tried, whatever fails.
     */
    public static String delete(final Configuration conf, String paths, int threads) throws InterruptedException {
        final String[] items = paths.isEmpty() ? new String[0] : paths.split("\n", -1);
        final char[] outcome = new char[items.length];
        final String[] errors = new String[items.length];
        BulkThreads.run(items.length, threads, "streamlake-bulk-delete", new BulkThreads.Task() {
            @Override
            public void run(int index) {
                deleteOne(conf, items, index, outcome, errors);
            }
        });
        StringBuilder result = new StringBuilder(items.length + 16).append(outcome);
        for (int i = 0; i < items.length; i++) {
            if (errors[i] != null) {
                result.append('\n').append(i).append('\t').append(errors[i]);
            }
        }
        return result.toString();
    }

    private static void deleteOne(Configuration conf, String[] items, int index, char[] outcome, String[] errors) {
        try {
            Path path = new Path(items[index]);
            FileSystem fs = path.getFileSystem(conf);  // FileSystem's cache: one instance per scheme and authority
            outcome[index] = fs.delete(path, false) ? DELETED : MISSING;
        } catch (Exception | LinkageError failure) {
            outcome[index] = FAILED;
            errors[index] = BulkThreads.describe(failure);
        }
    }
}
