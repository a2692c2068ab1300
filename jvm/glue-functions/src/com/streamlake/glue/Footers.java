package com.streamlake.glue;

import java.io.IOException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.ChecksumFileSystem;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.parquet.HadoopReadOptions;
import org.apache.parquet.ParquetReadOptions;
import org.apache.parquet.column.statistics.Statistics;
import org.apache.parquet.format.converter.ParquetMetadataConverter;
import org.apache.parquet.hadoop.ParquetFileReader;
import org.apache.parquet.hadoop.metadata.BlockMetaData;
import org.apache.parquet.hadoop.metadata.ColumnChunkMetaData;
import org.apache.parquet.hadoop.metadata.ParquetMetadata;
import org.apache.parquet.hadoop.util.HadoopInputFile;
import org.apache.parquet.hadoop.util.HadoopStreams;
import org.apache.parquet.io.InputFile;
import org.apache.parquet.io.SeekableInputStream;
import org.apache.parquet.schema.MessageType;
import org.apache.parquet.schema.Type;

/**
 * What the footers of a set of Parquet files say about all of them together, read on the driver by a few threads
 * (compaction/footers.py): no Spark job, and no call from Python per file (a partition has thousands of inputs).
 *
 * <p>The summary is text, one fact per line, fields separated by tabs:
 * <ul>
 * <li>{@code rows <n>}: the rows of every row group of every file (Parquet's BlockMetaData row count, what Spark's
 * count of Parquet files reads as well);</li>
 * <li>{@code schema <json>}: each distinct Spark schema the files carry, the JSON Spark's Parquet writer stores under the
 * key {@value #SPARK_SCHEMA} of the footer's key-value metadata (apache/spark ParquetWriteSupport.SPARK_ROW_SCHEMA);</li>
 * <li>{@code unschemed <n> <a path>}: files without that key (written by another writer), for which the caller asks
 * Spark to read the Parquet schema;</li>
 * <li>{@code nonnull <column> <n>}: for a top-level column that is a primitive and not repeated, its non-null values in
 * the files that hold it: each column chunk's rows less its statistics' null count (parquet-format Statistics
 * {@code null_count}; parquet-mr {@code Statistics.isNumNullsSet} is false where a writer left it out). {@code ?}
 * instead of a number where any chunk of the column has no null count; a nested or repeated column is not listed
 * (a chunk's null count counts the nulls of its leaf, not of the column), and the caller counts it with Spark.</li>
 * </ul>
 */
public final class Footers {
    public static final String SPARK_SCHEMA = "org.apache.spark.sql.parquet.row.metadata";

    private Footers() {
    }

    /**
     * The summary of the files {@code paths} lists, one per line (one string: no call per path), each line a path or
     * a path, a tab and the file's length in bytes (read without a status call, see {@link #footer}).
     * {@code schemasOnly}: the schema lines only, the row groups' metadata not even parsed (parquet-mr's
     * {@code ParquetMetadataConverter.SKIP_ROW_GROUPS}).
     */
    public static String summary(String paths, Configuration conf, int threads, boolean schemasOnly) throws Exception {
        return summary(Arrays.asList(paths.split("\n")), conf, threads, schemasOnly);
    }

    public static String summary(List<String> paths, Configuration conf, int threads, boolean schemasOnly)
            throws Exception {
        ExecutorService pool = Executors.newFixedThreadPool(Math.max(1, Math.min(threads, paths.size())));
        try {
            List<Future<ParquetMetadata>> footers = new ArrayList<>();
            for (String path : paths) {
                footers.add(pool.submit(() -> footer(path, conf, schemasOnly)));
            }
            long rows = 0;
            Map<String, Boolean> schemas = new LinkedHashMap<>();
            Map<String, long[]> nonNull = new LinkedHashMap<>();  // column -> {count, 1 if some chunk had no null count}
            int unschemed = 0;
            String firstUnschemed = null;
            for (int i = 0; i < paths.size(); i++) {
                ParquetMetadata footer = footers.get(i).get();
                String schema = footer.getFileMetaData().getKeyValueMetaData().get(SPARK_SCHEMA);
                if (schema == null) {
                    unschemed++;
                    firstUnschemed = firstUnschemed == null ? pathOf(paths.get(i)) : firstUnschemed;
                } else {
                    schemas.put(schema.replace('\n', ' '), Boolean.TRUE);
                }
                MessageType fileSchema = footer.getFileMetaData().getSchema();
                for (BlockMetaData block : footer.getBlocks()) {
                    rows += block.getRowCount();
                    for (ColumnChunkMetaData chunk : block.getColumns()) {
                        String[] path = chunk.getPath().toArray();
                        if (path.length != 1) {
                            continue;
                        }
                        Type type = fileSchema.getType(path[0]);
                        if (!type.isPrimitive() || type.isRepetition(Type.Repetition.REPEATED)) {
                            continue;
                        }
                        long[] count = nonNull.computeIfAbsent(path[0], name -> new long[2]);
                        Statistics<?> statistics = chunk.getStatistics();
                        if (statistics == null || !statistics.isNumNullsSet()) {
                            count[1] = 1;
                        } else {
                            count[0] += block.getRowCount() - statistics.getNumNulls();
                        }
                    }
                }
            }
            StringBuilder out = new StringBuilder("rows\t").append(rows).append('\n');
            for (String schema : schemas.keySet()) {
                out.append("schema\t").append(schema).append('\n');
            }
            if (unschemed > 0) {
                out.append("unschemed\t").append(unschemed).append('\t').append(firstUnschemed).append('\n');
            }
            for (Map.Entry<String, long[]> column : nonNull.entrySet()) {
                out.append("nonnull\t").append(column.getKey()).append('\t')
                        .append(column.getValue()[1] == 1 ? "?" : Long.toString(column.getValue()[0])).append('\n');
            }
            return out.toString();
        } finally {
            pool.shutdownNow();
        }
    }

    /**
     * The footer of the file a line names: {@code <path>} or {@code <path>\t<length>}. With its length (the caller's
     * listing has it) the file is opened without a status call first: parquet-mr's {@code HadoopInputFile.fromPath} asks
     * {@code FileSystem.getFileStatus} for the length (its bytecode in parquet-hadoop 1.12 and 1.13), on S3 a HEAD
     * request per file before the GET of the footer. On a local file system the footer is read from the raw file system:
     * Hadoop's ChecksumFileSystem would open each file's .crc beside it as well, a cost no object store has; a damaged
     * footer still fails its Thrift parse, and the rows are read by Spark with the checksums.
     */
    private static ParquetMetadata footer(String line, Configuration conf, boolean schemasOnly) throws IOException {
        ParquetReadOptions options = HadoopReadOptions.builder(conf)
                .withMetadataFilter(schemasOnly ? ParquetMetadataConverter.SKIP_ROW_GROUPS : ParquetMetadataConverter.NO_FILTER)
                .build();
        int tab = line.lastIndexOf('\t');
        InputFile file;
        if (tab < 0) {
            file = HadoopInputFile.fromPath(new Path(line), conf);
        } else {
            Path path = new Path(line.substring(0, tab));
            FileSystem fs = path.getFileSystem(conf);
            file = new KnownLength(fs instanceof ChecksumFileSystem ? ((ChecksumFileSystem) fs).getRawFileSystem() : fs,
                    path, Long.parseLong(line.substring(tab + 1)));
        }
        try (ParquetFileReader reader = ParquetFileReader.open(file, options)) {
            return reader.getFooter();
        }
    }

    private static String pathOf(String line) {
        int tab = line.lastIndexOf('\t');
        return tab < 0 ? line : line.substring(0, tab);
    }

    /** A file whose length the caller's listing gave: opened with no status call. */
    private static final class KnownLength implements InputFile {
        private final FileSystem fs;
        private final Path path;
        private final long length;

        KnownLength(FileSystem fs, Path path, long length) {
            this.fs = fs;
            this.path = path;
            this.length = length;
        }

        @Override
        public long getLength() {
            return length;
        }

        @Override
        public SeekableInputStream newStream() throws IOException {
            return HadoopStreams.wrap(fs.open(path));
        }

        @Override
        public String toString() {
            return path.toString();
        }
    }
}
