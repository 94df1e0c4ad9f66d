/*
 * s3conf.c: the S3 client's configuration, read the way the AWS command
 * line tools and SDKs read theirs, so that a machine set up for them
 * works unchanged:
 *
 *  1. The profile is AWS_PROFILE, else "default". Its credentials come
 *     from the section [name] of AWS_SHARED_CREDENTIALS_FILE (default
 *     ~/.aws/credentials); its region and endpoint_url (and credentials,
 *     when the first file has none) from the section [profile name] of
 *     AWS_CONFIG_FILE (default ~/.aws/config), [default] for the default
 *     profile. A missing file is an empty one.
 *  2. The environment wins over the files: AWS_ACCESS_KEY_ID with
 *     AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN); AWS_REGION, then
 *     AWS_DEFAULT_REGION, then the profile's region, then us-east-1;
 *     AWS_ENDPOINT_URL_S3, then AWS_ENDPOINT_URL, then the profile's
 *     endpoint_url, then https://s3.<region>.amazonaws.com. An empty
 *     variable counts as unset.
 *  3. Credentials come whole from one place (a key without its secret is
 *     an error, not a mix of sources). Without any, requests go unsigned,
 *     which public buckets accept.
 *  4. No message ever holds a credential: errors name the variable or
 *     the file, and secrets are wiped before they are freed.
 */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "internal.h"
#include "io.h"
#include "s3int.h"

/* Profile files larger than this are refused rather than read. */
#define CONF_FILE_MAX (1u << 20)

static const char *env(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

/* The values a profile file gives. */
enum { K_KEY, K_SECRET, K_TOKEN, K_REGION, K_ENDPOINT, K_COUNT };
static const char *const key_names[K_COUNT] = {
    "aws_access_key_id", "aws_secret_access_key", "aws_session_token", "region", "endpoint_url",
};

struct profile {
    char *val[K_COUNT];
    bool found; /* the file has the profile's section */
};

static void wipe_free(char *s)
{
    if (s) {
        explicit_bzero(s, strlen(s));
        zr_free(s);
    }
}

static void profile_free(struct profile *p)
{
    for (int i = 0; i < K_COUNT; i++)
        wipe_free(p->val[i]);
    *p = (struct profile){0};
}

static void trim(const char **s, const char **e)
{
    while (*s < *e && (**s == ' ' || **s == '\t'))
        (*s)++;
    while (*e > *s && ((*e)[-1] == ' ' || (*e)[-1] == '\t' || (*e)[-1] == '\r'))
        (*e)--;
}

static bool span_is(const char *s, const char *e, const char *word)
{
    return (size_t)(e - s) == strlen(word) && memcmp(s, word, (size_t)(e - s)) == 0;
}

/* Whether the header [s, e) (inside the brackets, trimmed) names the
 * profile: "name" in the credentials file; "profile name" in the config
 * file, where the default profile may also be plain "default". */
static bool section_is(const char *s, const char *e, const char *name, bool config)
{
    if (!config)
        return span_is(s, e, name);
    if (strcmp(name, "default") == 0 && span_is(s, e, "default"))
        return true;
    if ((size_t)(e - s) < 8 || memcmp(s, "profile", 7) != 0 || (s[7] != ' ' && s[7] != '\t'))
        return false;
    s += 7;
    trim(&s, &e);
    return span_is(s, e, name);
}

/* Read the profile's section of the INI file at path into p: lines
 * "key = value", comments starting with '#' or ';', and indented lines
 * (the nested settings of a key without a value), which are skipped. */
static int read_profile(const char *path, const char *name, bool config, struct profile *p)
{
    void *buf = NULL;
    size_t len = 0;
    int rc = zr_read_small_file(AT_FDCWD, path, CONF_FILE_MAX, &buf, &len, 1);
    if (rc != 0)
        return zr_err(ZR_EINVAL, "reading the AWS profile file: %s", zr_last_error());
    if (!buf)
        return 0;
    const char *s = buf, *end = s + len;
    bool in = false;
    while (s < end && rc == 0) {
        const char *nl = memchr(s, '\n', (size_t)(end - s));
        const char *e = nl ? nl : end;
        const char *next = nl ? nl + 1 : end;
        bool indented = s < e && (*s == ' ' || *s == '\t');
        trim(&s, &e);
        if (s == e || *s == '#' || *s == ';' || indented) {
            s = next;
            continue;
        }
        if (*s == '[') {
            const char *hs = s + 1, *he = memchr(s, ']', (size_t)(e - s));
            in = false;
            if (he) {
                trim(&hs, &he);
                in = section_is(hs, he, name, config);
                p->found |= in;
            }
            s = next;
            continue;
        }
        const char *eq = memchr(s, '=', (size_t)(e - s));
        if (in && eq) {
            const char *ks = s, *ke = eq, *vs = eq + 1, *ve = e;
            trim(&ks, &ke);
            trim(&vs, &ve);
            for (int i = 0; i < K_COUNT; i++) {
                if (p->val[i] || vs == ve || (size_t)(ke - ks) != strlen(key_names[i]) ||
                    strncasecmp(ks, key_names[i], (size_t)(ke - ks)) != 0)
                    continue;
                p->val[i] = zr_malloc((size_t)(ve - vs) + 1);
                if (!p->val[i]) {
                    rc = zr_err(ZR_ENOMEM, "reading the AWS profile file %s", path);
                    break;
                }
                memcpy(p->val[i], vs, (size_t)(ve - vs));
                p->val[i][ve - vs] = '\0';
            }
        }
        s = next;
    }
    explicit_bzero(buf, len);
    zr_free(buf);
    return rc;
}

/* The path of a profile file: the variable's value, else ~/.aws/<name>
 * (NULL without HOME). */
static char *file_path(const char *var, const char *name)
{
    struct zr_sbuf b = {0};
    if (env(var)) {
        zr_sbuf_str(&b, env(var));
    } else {
        if (!env("HOME"))
            return NULL;
        zr_sbuf_fmt(&b, "%s/.aws/%s", env("HOME"), name);
    }
    return zr_sbuf_take(&b);
}

static int dup_to(char **dst, const char *src)
{
    if (!src)
        return 0;
    *dst = zr_strdup(src);
    return *dst ? 0 : zr_err(ZR_ENOMEM, "reading the S3 configuration");
}

/* Check the endpoint and drop its trailing slashes. */
static int check_endpoint(char *ep, const char *from)
{
    size_t skip;
    if (strncasecmp(ep, "http://", 7) == 0)
        skip = 7;
    else if (strncasecmp(ep, "https://", 8) == 0)
        skip = 8;
    else
        return zr_err(ZR_EINVAL, "the S3 endpoint from %s must start with http:// or https://",
                      from);
    size_t n = strlen(ep);
    while (n > skip && ep[n - 1] == '/')
        ep[--n] = '\0';
    if (n == skip || ep[skip] == '/' || strpbrk(ep, "?# \t\r\n@"))
        return zr_err(ZR_EINVAL, "the S3 endpoint from %s is not a plain http(s) address",
                      from);
    return 0;
}

static int check_region(const char *region)
{
    for (const char *p = region; *p; p++) {
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
              (*p >= '0' && *p <= '9') || *p == '-' || *p == '_'))
            return zr_err(ZR_EINVAL, "the AWS region \"%s\" is not a region name", region);
    }
    return 0;
}

int zr_s3_conf_load(struct zr_s3_conf *conf)
{
    *conf = (struct zr_s3_conf){0};
    const char *name = env("AWS_PROFILE") ? env("AWS_PROFILE") : "default";
    struct profile cred = {0}, cfg = {0};
    char *cred_path = file_path("AWS_SHARED_CREDENTIALS_FILE", "credentials");
    char *cfg_path = file_path("AWS_CONFIG_FILE", "config");
    int rc = 0;
    if (cred_path)
        rc = read_profile(cred_path, name, false, &cred);
    if (rc == 0 && cfg_path)
        rc = read_profile(cfg_path, name, true, &cfg);
    if (rc == 0 && env("AWS_PROFILE") && !cred.found && !cfg.found)
        rc = zr_err(ZR_EINVAL, "the AWS profile \"%s\" (AWS_PROFILE) is in neither %s nor %s",
                    name, cred_path ? cred_path : "~/.aws/credentials",
                    cfg_path ? cfg_path : "~/.aws/config");
    if (rc != 0)
        goto out;

    if (env("AWS_ACCESS_KEY_ID") || env("AWS_SECRET_ACCESS_KEY")) {
        if (!env("AWS_ACCESS_KEY_ID") || !env("AWS_SECRET_ACCESS_KEY")) {
            rc = zr_err(ZR_EINVAL, "%s is set without %s",
                        env("AWS_ACCESS_KEY_ID") ? "AWS_ACCESS_KEY_ID" : "AWS_SECRET_ACCESS_KEY",
                        env("AWS_ACCESS_KEY_ID") ? "AWS_SECRET_ACCESS_KEY" : "AWS_ACCESS_KEY_ID");
            goto out;
        }
        rc = dup_to(&conf->key_id, env("AWS_ACCESS_KEY_ID"));
        if (rc == 0)
            rc = dup_to(&conf->secret, env("AWS_SECRET_ACCESS_KEY"));
        if (rc == 0)
            rc = dup_to(&conf->token, env("AWS_SESSION_TOKEN"));
    } else {
        struct profile *from = cred.val[K_KEY] || cred.val[K_SECRET] ? &cred : &cfg;
        const char *path = from == &cred ? cred_path : cfg_path;
        if (!from->val[K_KEY] != !from->val[K_SECRET]) {
            rc = zr_err(ZR_EINVAL, "the AWS profile \"%s\" in %s has %s without %s", name, path,
                        from->val[K_KEY] ? "aws_access_key_id" : "aws_secret_access_key",
                        from->val[K_KEY] ? "aws_secret_access_key" : "aws_access_key_id");
            goto out;
        }
        rc = dup_to(&conf->key_id, from->val[K_KEY]);
        if (rc == 0)
            rc = dup_to(&conf->secret, from->val[K_SECRET]);
        if (rc == 0)
            rc = dup_to(&conf->token, from->val[K_TOKEN]);
    }
    if (rc != 0)
        goto out;

    const char *region = env("AWS_REGION");
    if (!region)
        region = env("AWS_DEFAULT_REGION");
    if (!region)
        region = cfg.val[K_REGION];
    if (!region)
        region = "us-east-1";
    rc = check_region(region);
    if (rc == 0)
        rc = dup_to(&conf->region, region);
    if (rc != 0)
        goto out;

    const char *from = "AWS_ENDPOINT_URL_S3";
    const char *ep = env(from);
    if (!ep)
        ep = env(from = "AWS_ENDPOINT_URL");
    if (!ep) {
        ep = cfg.val[K_ENDPOINT];
        from = cfg_path;
    }
    if (ep) {
        rc = dup_to(&conf->endpoint, ep);
    } else {
        struct zr_sbuf b = {0};
        zr_sbuf_fmt(&b, "https://s3.%s.amazonaws.com", conf->region);
        conf->endpoint = zr_sbuf_take(&b);
        from = "the region";
        if (!conf->endpoint)
            rc = zr_err(ZR_ENOMEM, "reading the S3 configuration");
    }
    if (rc == 0)
        rc = check_endpoint(conf->endpoint, from);

out:
    profile_free(&cred);
    profile_free(&cfg);
    zr_free(cred_path);
    zr_free(cfg_path);
    if (rc != 0)
        zr_s3_conf_free(conf);
    return rc;
}

void zr_s3_conf_free(struct zr_s3_conf *conf)
{
    zr_free(conf->endpoint);
    zr_free(conf->region);
    wipe_free(conf->key_id);
    wipe_free(conf->secret);
    wipe_free(conf->token);
    *conf = (struct zr_s3_conf){0};
}

int zr_s3_parse_url(const char *url, char **bucket, char **prefix)
{
    *bucket = *prefix = NULL;
    if (strncmp(url, "s3://", 5) != 0)
        return zr_err(ZR_EINVAL, "%s is not an s3:// address", url);
    const char *b = url + 5;
    size_t blen = strcspn(b, "/");
    if (blen == 0 || blen > 255)
        return zr_err(ZR_EINVAL, "%s: the bucket name is %s", url, blen ? "too long" : "missing");
    for (size_t i = 0; i < blen; i++) {
        char ch = b[i];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              ch == '-' || ch == '.' || ch == '_'))
            return zr_err(ZR_EINVAL, "%s: the bucket name may hold only letters, digits, '-', "
                                     "'.' and '_'",
                          url);
    }
    const char *p = b + blen;
    while (*p == '/')
        p++;
    size_t plen = strlen(p);
    while (plen > 0 && p[plen - 1] == '/')
        plen--;
    *bucket = zr_malloc(blen + 1);
    *prefix = zr_malloc(plen + 1);
    if (!*bucket || !*prefix) {
        zr_free(*bucket);
        zr_free(*prefix);
        *bucket = *prefix = NULL;
        return zr_err(ZR_ENOMEM, "parsing %s", url);
    }
    memcpy(*bucket, b, blen);
    (*bucket)[blen] = '\0';
    memcpy(*prefix, p, plen);
    (*prefix)[plen] = '\0';
    return 0;
}
