/* check_npy.c: zr's NPY header parser (src/npy.c) and the header writer
 * zr and zrecordfs share (common/npyheader.c). */
#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "src/npy.h"
#include "tests/helpers.h"
#include "tests/suites.h"

/* A version 1.0 file prefix around the dict text d: preamble, d, padding
 * to a multiple of 64, newline. Returns a malloc'd buffer of exactly *len
 * bytes, so that an over-read is caught by the sanitizers. */
static uint8_t *v1_file(const char *d, size_t *len)
{
    size_t n = strlen(d);
    size_t total = (10 + n + 1 + 63) / 64 * 64;
    uint8_t *b = malloc(total);
    ck_assert_ptr_nonnull(b);
    memcpy(b, "\x93NUMPY\x01\x00", 8);
    b[8] = (uint8_t)(total - 10);
    b[9] = (uint8_t)((total - 10) >> 8);
    memcpy(b + 10, d, n);
    memset(b + 10 + n, ' ', total - 10 - n - 1);
    b[total - 1] = '\n';
    *len = total;
    return b;
}

static int parse_text(const char *d, struct npy_header *h)
{
    size_t len;
    uint8_t *b = v1_file(d, &len);
    char err[256];
    int rc = npy_parse(b, len, h, err, sizeof err);
    free(b);
    return rc;
}

START_TEST(parses_the_header_numpy_writes)
{
    /* np.save(f, np.zeros((3, 4), "<f4")) with NumPy 1.24 */
    static const char numpy_header[] =
        "\x93NUMPY\x01\x00v\x00{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }"
        "                                                          \n";
    struct npy_header h;
    char err[256];
    ck_assert_int_eq(npy_parse((const uint8_t *)numpy_header, sizeof numpy_header - 1, &h, err,
                               sizeof err),
                     NPY_OK);
    ck_assert_int_eq(h.major, 1);
    ck_assert_str_eq(h.descr, "<f4");
    ck_assert(!h.fortran_order && !h.structured);
    ck_assert_uint_eq(h.ndim, 2);
    ck_assert_uint_eq(h.shape[0], 3);
    ck_assert_uint_eq(h.shape[1], 4);
    ck_assert_uint_eq(h.data_offset, 128);
}
END_TEST

START_TEST(reads_versions_2_and_3)
{
    /* write_array(f, np.zeros((2, 3), ">i2"), version=(3, 0)) with NumPy 1.24 */
    static const char v3[] =
        "\x93NUMPY\x03\x00t\x00\x00\x00{'descr': '>i2', 'fortran_order': False, 'shape': (2, 3), }"
        "                                                        \n";
    struct npy_header h;
    char err[256];
    ck_assert_int_eq(npy_parse((const uint8_t *)v3, sizeof v3 - 1, &h, err, sizeof err), NPY_OK);
    ck_assert_int_eq(h.major, 3);
    ck_assert_str_eq(h.descr, ">i2");
    ck_assert_uint_eq(h.data_offset, 128);
    uint8_t v2[sizeof v3 - 1];
    memcpy(v2, v3, sizeof v2);
    v2[6] = 2;
    ck_assert_int_eq(npy_parse(v2, sizeof v2, &h, err, sizeof err), NPY_OK);
    ck_assert_int_eq(h.major, 2);
    ck_assert_uint_eq(h.shape[1], 3);
}
END_TEST

START_TEST(accepts_every_spelling_of_a_valid_dict)
{
    static const char *ok[] = {
        "{\"descr\": \"<f4\", \"fortran_order\": False, \"shape\": (3, 4)}",
        "{'shape': (3, 4), 'fortran_order': False, 'descr': '<f4'}",
        "{ 'descr' : '<f4' ,\n 'fortran_order' : False ,\t'shape' : ( 3 , 4 , ) , }",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (3L, 4L), }",
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        struct npy_header h;
        ck_assert_msg(parse_text(ok[i], &h) == NPY_OK, "refused: %s", ok[i]);
        ck_assert_str_eq(h.descr, "<f4");
        ck_assert_uint_eq(h.ndim, 2);
        ck_assert_uint_eq(h.shape[0], 3);
        ck_assert_uint_eq(h.shape[1], 4);
    }
    struct npy_header h;
    ck_assert_int_eq(parse_text("{'descr': '|u1', 'fortran_order': True, 'shape': ()}", &h),
                     NPY_OK);
    ck_assert_uint_eq(h.ndim, 0);
    ck_assert(h.fortran_order);
    ck_assert_int_eq(parse_text("{'descr': '|u1', 'fortran_order': False, 'shape': (0,)}", &h),
                     NPY_OK);
    ck_assert_uint_eq(h.ndim, 1);
    ck_assert_uint_eq(h.shape[0], 0);
}
END_TEST

START_TEST(refuses_malformed_dicts)
{
    static const char *bad[] = {
        "",
        "[]",
        "{}",
        "{'descr': '<f4', 'fortran_order': False}",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), 'x': 1}",
        "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (3,)}",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (3)}",
        "{'descr': '<f4', 'fortran_order': False, 'shape': 3}",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (-3,)}",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (03,)}",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (3.0,)}",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (1_000,)}",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (18446744073709551616,)}",
        "{'descr': '<f4', 'fortran_order': false, 'shape': (3,)}",
        "{'descr': '<f4', 'fortran_order': Falsey, 'shape': (3,)}",
        "{'descr': '<f4', 'fortran_order': 0, 'shape': (3,)}",
        "{'descr': '<f\\x34', 'fortran_order': False, 'shape': (3,)}",
        "{'descr': '<f4\", 'fortran_order': False, 'shape': (3,)}",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (3,),, }",
        "{, 'descr': '<f4', 'fortran_order': False, 'shape': (3,)}",
        "{'descr': '<f4' 'fortran_order': False, 'shape': (3,)}",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (3,)} x",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (3,)",
        "{'descr': b'<f4', 'fortran_order': False, 'shape': (3,)}",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), '\xc3\xa9': 1}",
        "{'descr': [('a', '<f4'), 'fortran_order': False, 'shape': (3,)}",
        "__import__('os').system('true')",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct npy_header h;
        ck_assert_msg(parse_text(bad[i], &h) == NPY_EFORMAT, "accepted: %s", bad[i]);
    }
}
END_TEST

START_TEST(refuses_bad_preambles)
{
    struct npy_header h;
    char err[256];
    size_t len;
    uint8_t *b = v1_file("{'descr': '<f4', 'fortran_order': False, 'shape': (3,)}", &len);
    ck_assert_int_eq(npy_parse(b, len, &h, err, sizeof err), NPY_OK);
    b[1] = 'n';
    ck_assert_int_eq(npy_parse(b, len, &h, err, sizeof err), NPY_EFORMAT);
    ck_assert_ptr_nonnull(strstr(err, "not an NPY file"));
    b[1] = 'N';
    b[6] = 4;
    ck_assert_int_eq(npy_parse(b, len, &h, err, sizeof err), NPY_EUNSUPPORTED);
    ck_assert_str_eq(err, "NPY format version 4.0 is not supported (1.0, 2.0 and 3.0 are)");
    b[6] = 1;
    b[7] = 1;
    ck_assert_int_eq(npy_parse(b, len, &h, err, sizeof err), NPY_EUNSUPPORTED);
    b[7] = 0;
    /* A header length pointing past the end of the buffer. */
    b[8] = 0xff;
    ck_assert_int_eq(npy_parse(b, len, &h, err, sizeof err), NPY_EFORMAT);
    ck_assert_ptr_nonnull(strstr(err, "ends inside its header"));
    /* Version 2.0 with a header length beyond the limit. */
    uint8_t huge[12] = {0x93, 'N', 'U', 'M', 'P', 'Y', 2, 0, 0, 0, 0x40, 0};
    ck_assert_int_eq(npy_preamble(huge, sizeof huge, &h, err, sizeof err), NPY_EFORMAT);
    ck_assert_ptr_nonnull(strstr(err, "exceeds the limit"));
    free(b);
}
END_TEST

START_TEST(applies_zr_policy_with_reasons)
{
    static const struct {
        const char *dict;
        const char *reason;
    } refused[] = {
        {"{'descr': '<f4', 'fortran_order': True, 'shape': (3, 4)}", "Fortran-order"},
        {"{'descr': '|O', 'fortran_order': False, 'shape': (3,)}", "object arrays"},
        {"{'descr': [('a', '<i4'), ('b', '<f8', (2,))], 'fortran_order': False, 'shape': (3,)}",
         "structured dtypes"},
        {"{'descr': '<M8[D]', 'fortran_order': False, 'shape': (3,)}", "not one loaderx stores"},
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        struct npy_header h;
        uint64_t itemsize, nbytes;
        char err[256];
        ck_assert_int_eq(parse_text(refused[i].dict, &h), NPY_OK);
        ck_assert_int_eq(npy_check_supported(&h, &itemsize, &nbytes, err, sizeof err),
                         NPY_EUNSUPPORTED);
        ck_assert_msg(strstr(err, refused[i].reason), "%s: %s", refused[i].dict, err);
    }
    struct npy_header h;
    uint64_t itemsize, nbytes;
    char err[256];
    ck_assert_int_eq(parse_text("{'descr': '<c16', 'fortran_order': False, 'shape': (5, 3)}", &h),
                     NPY_OK);
    ck_assert_int_eq(npy_check_supported(&h, &itemsize, &nbytes, err, sizeof err), NPY_OK);
    ck_assert_uint_eq(itemsize, 16);
    ck_assert_uint_eq(nbytes, 16 * 5 * 3);
    /* Each dimension fits in 64 bits, their product does not. */
    ck_assert_int_eq(parse_text("{'descr': '<f8', 'fortran_order': False, "
                                "'shape': (4294967296, 4294967296)}",
                                &h),
                     NPY_OK);
    ck_assert_int_eq(npy_check_supported(&h, &itemsize, &nbytes, err, sizeof err), NPY_EFORMAT);
}
END_TEST

START_TEST(no_truncation_or_byte_flip_reads_outside_the_buffer)
{
    size_t len;
    uint8_t *good = v1_file(
        "{'descr': [('a', '<i4'), ('b', '<f8', (2, 3))], 'fortran_order': False, 'shape': (7, 2), }",
        &len);
    char err[256];
    struct npy_header h;
    ck_assert_int_eq(npy_parse(good, len, &h, err, sizeof err), NPY_OK);
    ck_assert(h.structured);
    /* Every prefix is refused (the header is incomplete), reading only its
     * own bytes: each copy is exactly as long as the prefix. */
    for (size_t n = 0; n < len; n++) {
        uint8_t *cut = malloc(n ? n : 1);
        memcpy(cut, good, n);
        ck_assert_int_ne(npy_parse(cut, n, &h, err, sizeof err), NPY_OK);
        free(cut);
    }
    /* Every byte replaced by every interesting value parses or is refused,
     * and what parses is consistent. */
    static const uint8_t values[] = {0, '\'', '"', '(', ')', '[', ']', ',', ':', '{', '}',
                                     '\\', '\n', '9', 'L', 0x80, 0xff};
    uint8_t *m = malloc(len);
    for (size_t i = 0; i < len; i++)
        for (size_t v = 0; v < sizeof values; v++) {
            memcpy(m, good, len);
            m[i] = values[v];
            int rc = npy_parse(m, len, &h, err, sizeof err);
            ck_assert(rc == NPY_OK || rc == NPY_EFORMAT || rc == NPY_EUNSUPPORTED);
            if (rc == NPY_OK) {
                ck_assert_uint_le(h.ndim, NPY_MAX_NDIM);
                ck_assert_uint_lt(strlen(h.descr), NPY_DESCR_MAX);
                ck_assert_uint_le(h.data_offset, len);
            }
        }
    free(m);
    free(good);
}
END_TEST

START_TEST(formats_aligned_headers_that_parse_back)
{
    static const uint64_t shape[] = {1000000007, 3, 224, 224};
    uint8_t out[NPY_FORMAT_CAP];
    for (uint32_t ndim = 0; ndim <= 4; ndim++) {
        size_t n = npy_format_header("<U12", shape, ndim, out, sizeof out);
        ck_assert_uint_gt(n, 0);
        ck_assert_uint_eq(n % 64, 0);
        ck_assert_int_eq(out[n - 1], '\n');
        struct npy_header h;
        char err[256];
        ck_assert_int_eq(npy_parse(out, n, &h, err, sizeof err), NPY_OK);
        ck_assert_uint_eq(h.data_offset, n);
        ck_assert_str_eq(h.descr, "<U12");
        ck_assert(!h.fortran_order);
        ck_assert_uint_eq(h.ndim, ndim);
        for (uint32_t d = 0; d < ndim; d++)
            ck_assert_uint_eq(h.shape[d], shape[d]);
    }
    /* The same bytes NumPy 1.24 writes for np.zeros((7,), "|u1"). */
    static const char numpy_header[] =
        "\x93NUMPY\x01\x00v\x00{'descr': '|u1', 'fortran_order': False, 'shape': (7,), }"
        "                                                            \n";
    uint64_t seven = 7;
    size_t n = npy_format_header("|u1", &seven, 1, out, sizeof out);
    ck_assert_uint_eq(n, sizeof numpy_header - 1);
    ck_assert_mem_eq(out, numpy_header, n);
    ck_assert_uint_eq(npy_format_header("|u1", &seven, 1, out, 64), 0);
}
END_TEST

START_TEST(formats_the_largest_shapes_and_refuses_what_no_array_has)
{
    uint64_t shape[NPY_MAX_NDIM + 1];
    for (size_t d = 0; d <= NPY_MAX_NDIM; d++)
        shape[d] = UINT64_MAX;
    static uint8_t out[NPY_FORMAT_CAP];
    char descr[NPY_DESCR_MAX + 1];
    memset(descr, 'S', sizeof descr);
    descr[0] = '|';
    descr[NPY_DESCR_MAX - 1] = '\0';
    /* NPY_MAX_NDIM dimensions of 2^64 - 1 and the longest descr fit
     * NPY_FORMAT_CAP, and parse back. */
    size_t n = npy_format_header(descr, shape, NPY_MAX_NDIM, out, sizeof out);
    ck_assert_uint_gt(n, 0);
    ck_assert_uint_eq(n % 64, 0);
    struct npy_header h;
    char err[256];
    ck_assert_int_eq(npy_parse(out, n, &h, err, sizeof err), NPY_OK);
    ck_assert_uint_eq(h.ndim, NPY_MAX_NDIM);
    ck_assert_uint_eq(h.shape[NPY_MAX_NDIM - 1], UINT64_MAX);
    ck_assert_str_eq(h.descr, descr);
    /* Exactly the header's length is enough; a byte less is not. */
    ck_assert_uint_eq(npy_format_header(descr, shape, NPY_MAX_NDIM, out, n), n);
    ck_assert_uint_eq(npy_format_header(descr, shape, NPY_MAX_NDIM, out, n - 1), 0);
    /* One dimension more, a longer descr, no descr, no shape. */
    ck_assert_uint_eq(npy_format_header(descr, shape, NPY_MAX_NDIM + 1, out, sizeof out), 0);
    descr[NPY_DESCR_MAX - 1] = 'S';
    descr[NPY_DESCR_MAX] = '\0';
    ck_assert_uint_eq(npy_format_header(descr, shape, 1, out, sizeof out), 0);
    ck_assert_uint_eq(npy_format_header(NULL, shape, 1, out, sizeof out), 0);
    ck_assert_uint_eq(npy_format_header("<f4", NULL, 1, out, sizeof out), 0);
    ck_assert_uint_gt(npy_format_header("<f4", NULL, 0, out, sizeof out), 0);
}
END_TEST

START_TEST(pads_each_header_to_the_next_multiple_of_64)
{
    static const char *const descrs[] = {"|u1", "<f8", "|S10", "<U100"};
    uint8_t out[NPY_FORMAT_CAP];
    bool exact = false;
    for (size_t k = 0; k < sizeof descrs / sizeof descrs[0]; k++)
        for (uint32_t ndim = 0; ndim <= 3; ndim++)
            for (uint64_t v = 1;; v *= 10) {
                const uint64_t shape[3] = {v, v, v};
                size_t n = npy_format_header(descrs[k], shape, ndim, out, sizeof out);
                ck_assert_uint_gt(n, 0);
                ck_assert_uint_eq(n % 64, 0);
                ck_assert_uint_eq((size_t)out[8] | (size_t)out[9] << 8, n - 10);
                ck_assert_int_eq(out[n - 1], '\n');
                /* Spaces between the dict's closing brace and the newline,
                 * never a whole 64 of them. */
                size_t brace = n - 2;
                while (out[brace] == ' ')
                    brace--;
                ck_assert_int_eq(out[brace], '}');
                ck_assert_uint_lt(n - 2 - brace, 64);
                exact |= brace == n - 2;
                struct npy_header h;
                char err[256];
                ck_assert_int_eq(npy_parse(out, n, &h, err, sizeof err), NPY_OK);
                ck_assert_uint_eq(h.ndim, ndim);
                if (v > UINT64_MAX / 10)
                    break; /* 10^19, the last power of ten below 2^64 */
            }
    /* ("|S10", three dimensions of 10^18) fills 128 bytes with no space. */
    ck_assert(exact);
}
END_TEST

START_TEST(reading_a_file_checks_the_data_is_there)
{
    char *dir = zt_tempdir();
    char *path = zt_join(dir, "a.npy");
    uint64_t shape[] = {5, 4};
    uint8_t header[NPY_FORMAT_CAP];
    size_t hlen = npy_format_header("<i2", shape, 2, header, sizeof header);
    uint8_t data[40] = {0};
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, header, hlen), (ssize_t)hlen);
    ck_assert_int_eq(write(fd, data, sizeof data), (ssize_t)sizeof data);
    struct npy_header h;
    uint64_t itemsize, nbytes;
    char err[256];
    ck_assert_int_eq(npy_read_header(fd, hlen + 40, &h, &itemsize, &nbytes, err, sizeof err),
                     NPY_OK);
    ck_assert_uint_eq(nbytes, 40);
    ck_assert_int_eq(ftruncate(fd, (off_t)(hlen + 39)), 0);
    ck_assert_int_eq(npy_read_header(fd, hlen + 39, &h, &itemsize, &nbytes, err, sizeof err),
                     NPY_EFORMAT);
    ck_assert_ptr_nonnull(strstr(err, "truncated"));
    ck_assert_int_eq(npy_read_header(fd, 5, &h, &itemsize, &nbytes, err, sizeof err),
                     NPY_EFORMAT);
    close(fd);
    zt_rmtree(dir);
    free(path);
    free(dir);
}
END_TEST

Suite *suite_npy(void)
{
    Suite *s = suite_create("npy");
    TCase *tc = tcase_create("npy");
    tcase_add_test(tc, parses_the_header_numpy_writes);
    tcase_add_test(tc, reads_versions_2_and_3);
    tcase_add_test(tc, accepts_every_spelling_of_a_valid_dict);
    tcase_add_test(tc, refuses_malformed_dicts);
    tcase_add_test(tc, refuses_bad_preambles);
    tcase_add_test(tc, applies_zr_policy_with_reasons);
    tcase_add_test(tc, no_truncation_or_byte_flip_reads_outside_the_buffer);
    tcase_add_test(tc, formats_aligned_headers_that_parse_back);
    tcase_add_test(tc, formats_the_largest_shapes_and_refuses_what_no_array_has);
    tcase_add_test(tc, pads_each_header_to_the_next_multiple_of_64);
    tcase_add_test(tc, reading_a_file_checks_the_data_is_there);
    suite_add_tcase(s, tc);
    return s;
}
