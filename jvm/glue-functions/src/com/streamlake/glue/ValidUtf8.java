package com.streamlake.glue;

import org.apache.spark.sql.api.java.UDF1;

/**
 * Bytes -> whether they are well-formed UTF-8 (RFC 3629 section 4: no overlong form, no surrogate code point, nothing
 * above U+10FFFF, no truncated sequence), or null for null.
 *
 * <p>The local runner asks it about each input file's bytes once (glue_jobs/sources/__init__.py {@code from_local_files}): Spark's
 * text source hands the file's bytes over undecoded, and only a file that is not UTF-8 has its lines checked and its bad
 * lines dead-lettered with their bytes. It is one pass over the bytes without allocating, where Spark 3's expressions
 * take a decode, an encode and a comparison (Spark 4 has {@code is_valid_utf8}). Compiled for Java 8 like
 * {@link StrictJsonRecord}.
 */
public final class ValidUtf8 implements UDF1<byte[], Boolean> {
    private static final long serialVersionUID = 1L;

    @Override
    public Boolean call(byte[] bytes) {
        return bytes == null ? null : valid(bytes);
    }

    /** Whether {@code bytes} are well-formed UTF-8 (RFC 3629 section 4's table of well-formed byte sequences). */
    static boolean valid(byte[] bytes) {
        int i = 0;
        int n = bytes.length;
        while (i < n) {
            int b = bytes[i] & 0xFF;
            if (b < 0x80) {
                i++;
                continue;
            }
            int length;
            int low = 0x80;
            int high = 0xBF;  // the second byte's range; the others are always 80..BF
            if (b >= 0xC2 && b <= 0xDF) {
                length = 2;
            } else if (b >= 0xE0 && b <= 0xEF) {
                length = 3;
                if (b == 0xE0) {
                    low = 0xA0;  // no overlong form
                } else if (b == 0xED) {
                    high = 0x9F;  // no surrogate
                }
            } else if (b >= 0xF0 && b <= 0xF4) {
                length = 4;
                if (b == 0xF0) {
                    low = 0x90;  // no overlong form
                } else if (b == 0xF4) {
                    high = 0x8F;  // nothing above U+10FFFF
                }
            } else {
                return false;  // 80..C1 (a continuation or overlong lead) and F5..FF never start a sequence
            }
            if (i + length > n) {
                return false;
            }
            int second = bytes[i + 1] & 0xFF;
            if (second < low || second > high) {
                return false;
            }
            for (int k = 2; k < length; k++) {
                int next = bytes[i + k] & 0xFF;
                if (next < 0x80 || next > 0xBF) {
                    return false;
                }
            }
            i += length;
        }
        return true;
    }
}
