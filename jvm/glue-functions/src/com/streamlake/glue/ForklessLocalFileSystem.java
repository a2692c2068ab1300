package com.streamlake.glue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.attribute.PosixFilePermission;
import java.util.EnumSet;
import java.util.Set;

import org.apache.hadoop.fs.LocalFileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RawLocalFileSystem;
import org.apache.hadoop.fs.permission.FsPermission;

/**
 * Hadoop's local file system with one change: permissions are set through java.nio, not by starting a process.
 * For local sessions only (glue_jobs/session.py local_session and the deploy rehearsal's stand-in for S3 as local
 * folders, as {@code fs.file.impl}); a Glue job writes to S3, which sets no permission bits.
 *
 * <p>Without Hadoop's native library (libhadoop, which pyspark does not ship), {@code RawLocalFileSystem.setPermission}
 * runs the command {@code chmod} (hadoop-common RawLocalFileSystem: "Use the command chmod to set permission",
 * {@code Shell.execCommand(Shell.getSetPermissionCommand(...))} unless {@code NativeIO.isAvailable()}). It is called
 * for every file created with a permission (each data file and its checksum file) and every directory made: a
 * micro-batch over 49 hour partitions started about 300 processes (docs/performance.md). The permissions set are the
 * same; a mode with bits beyond rwx for owner, group and others (sticky, setuid: never set by Spark's writers) goes
 * the original way, as does a file system without POSIX attributes.
 *
 * <p>Compiled with {@code javac --release 8} against Hadoop 3.3's client API (Glue 4.0's line); only public
 * FileSystem API is overridden.
 */
public class ForklessLocalFileSystem extends LocalFileSystem {
    public ForklessLocalFileSystem() {
        super(new Raw());
    }

    /** RawLocalFileSystem with {@link #setPermission} through {@code Files.setPosixFilePermissions}. */
    public static class Raw extends RawLocalFileSystem {
        // Bit i of the mode (0 = others' execute ... 8 = owner's read).
        private static final PosixFilePermission[] BITS = {
            PosixFilePermission.OTHERS_EXECUTE, PosixFilePermission.OTHERS_WRITE, PosixFilePermission.OTHERS_READ,
            PosixFilePermission.GROUP_EXECUTE, PosixFilePermission.GROUP_WRITE, PosixFilePermission.GROUP_READ,
            PosixFilePermission.OWNER_EXECUTE, PosixFilePermission.OWNER_WRITE, PosixFilePermission.OWNER_READ,
        };

        @Override
        public void setPermission(Path p, FsPermission permission) throws IOException {
            short mode = permission.toShort();
            if ((mode & ~0777) != 0) {
                super.setPermission(p, permission);
                return;
            }
            Set<PosixFilePermission> wanted = EnumSet.noneOf(PosixFilePermission.class);
            for (int bit = 0; bit < BITS.length; bit++) {
                if ((mode & (1 << bit)) != 0) {
                    wanted.add(BITS[bit]);
                }
            }
            try {
                Files.setPosixFilePermissions(pathToFile(p).toPath(), wanted);
            } catch (UnsupportedOperationException notPosix) {
                super.setPermission(p, permission);
            }
        }
    }
}
