/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * A small C shim over Berkeley DB 5.3 for db_bench's `berkeleydb` engine
 * (src/engine/berkeleydb.rs). Berkeley DB's handles are structs of function
 * pointers, which Rust cannot call as plain symbols; these functions call them.
 *
 * Return codes: 0 on success, SHIM_NOTFOUND when a key or cursor position does
 * not exist, SHIM_BUFFER_SMALL when a caller's buffer is too small (the needed
 * length is returned), and otherwise Berkeley DB's own error code, which
 * bdbshim_strerror() turns into text. Deadlocks (DB_LOCK_DEADLOCK) are returned
 * as they are by the write primitives, so that the caller can abort and retry
 * the whole transaction; reads retry them here.
 */

#include <db.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SHIM_NOTFOUND (-1)
#define SHIM_BUFFER_SMALL (-2)

/* The database file inside the environment directory. */
#define BDBSHIM_FILE "bench.db"

struct bdbshim {
    DB_ENV *env;
    DB *db;
};

struct bdbshim_cursor {
    struct bdbshim *store;
    DBC *dbc;
    /* Output buffers, reallocated by Berkeley DB as needed (DB_DBT_REALLOC). */
    DBT key;
    DBT data;
    /* The last key returned, to find the position again after a deadlock. */
    void *saved;
    size_t saved_len;
    size_t saved_cap;
    int have_saved;
};

/* Cursor operations, as the Rust side names them. */
enum { OP_FIRST = 0, OP_LAST = 1, OP_NEXT = 2, OP_PREV = 3, OP_SET_RANGE = 4 };

const char *bdbshim_strerror(int rc)
{
    if (rc == SHIM_NOTFOUND)
        return "not found";
    if (rc == SHIM_BUFFER_SMALL)
        return "buffer too small";
    return db_strerror(rc);
}

int bdbshim_is_deadlock(int rc)
{
    return rc == DB_LOCK_DEADLOCK || rc == DB_LOCK_NOTGRANTED;
}

static void input_dbt(DBT *dbt, const void *data, size_t len)
{
    memset(dbt, 0, sizeof(*dbt));
    dbt->data = (void *)data;
    dbt->size = (u_int32_t)len;
    dbt->flags = DB_DBT_READONLY;
}

int bdbshim_open(const char *home, uint64_t cache_bytes, struct bdbshim **out)
{
    const uint64_t gig = 1024u * 1024u * 1024u;
    struct bdbshim *s;
    DB_ENV *env = NULL;
    DB *db = NULL;
    int rc;

    *out = NULL;
    if ((rc = db_env_create(&env, 0)) != 0)
        return rc;
    /* One cache region of the whole budget. */
    if ((rc = env->set_cachesize(env, (u_int32_t)(cache_bytes / gig),
             (u_int32_t)(cache_bytes % gig), 1)) != 0)
        goto fail;
    /* Commits write the log to the operating system without fsync. */
    if ((rc = env->set_flags(env, DB_TXN_WRITE_NOSYNC, 1)) != 0)
        goto fail;
    /* Remove log files once no checkpoint needs them (as Symas ran it). */
    if ((rc = env->log_set_config(env, DB_LOG_AUTO_REMOVE, 1)) != 0)
        goto fail;
    /* Resolve lock conflicts between threads by aborting one of them. */
    if ((rc = env->set_lk_detect(env, DB_LOCK_DEFAULT)) != 0)
        goto fail;
    rc = env->open(env, home,
        DB_CREATE | DB_INIT_MPOOL | DB_INIT_TXN | DB_INIT_LOCK | DB_INIT_LOG |
            DB_THREAD | DB_PRIVATE | DB_RECOVER,
        0);
    if (rc != 0)
        goto fail;
    if ((rc = db_create(&db, env, 0)) != 0)
        goto fail;
    rc = db->open(db, NULL, BDBSHIM_FILE, NULL, DB_BTREE,
        DB_CREATE | DB_AUTO_COMMIT | DB_THREAD, 0644);
    if (rc != 0)
        goto fail;
    if ((s = malloc(sizeof(*s))) == NULL) {
        rc = ENOMEM;
        goto fail;
    }
    s->env = env;
    s->db = db;
    *out = s;
    return 0;

fail:
    if (db != NULL)
        (void)db->close(db, 0);
    (void)env->close(env, 0);
    return rc;
}

int bdbshim_close(struct bdbshim *s)
{
    int rc, t;

    /* A checkpoint makes the next open's recovery short. */
    rc = s->env->txn_checkpoint(s->env, 0, 0, 0);
    if ((t = s->db->close(s->db, 0)) != 0 && rc == 0)
        rc = t;
    if ((t = s->env->close(s->env, 0)) != 0 && rc == 0)
        rc = t;
    free(s);
    return rc;
}

int bdbshim_txn_begin(struct bdbshim *s, DB_TXN **txn)
{
    return s->env->txn_begin(s->env, NULL, txn, 0);
}

int bdbshim_txn_commit(DB_TXN *txn, int sync)
{
    /* DB_TXN_SYNC overrides the environment's DB_TXN_WRITE_NOSYNC. */
    return txn->commit(txn, sync ? DB_TXN_SYNC : 0);
}

int bdbshim_txn_abort(DB_TXN *txn)
{
    return txn->abort(txn);
}

int bdbshim_put(struct bdbshim *s, DB_TXN *txn, const void *key, size_t klen,
    const void *val, size_t vlen)
{
    DBT k, v;

    input_dbt(&k, key, klen);
    input_dbt(&v, val, vlen);
    return s->db->put(s->db, txn, &k, &v, 0);
}

int bdbshim_del(struct bdbshim *s, DB_TXN *txn, const void *key, size_t klen)
{
    DBT k;
    int rc;

    input_dbt(&k, key, klen);
    rc = s->db->del(s->db, txn, &k, 0);
    return rc == DB_NOTFOUND ? 0 : rc;
}

/*
 * Reads the value of `key` into `buf` (DB_DBT_USERMEM, `cap` bytes); `*len`
 * gets its length. Returns SHIM_BUFFER_SMALL, with `*len` the length needed,
 * when the value does not fit.
 */
int bdbshim_get(struct bdbshim *s, const void *key, size_t klen, void *buf,
    size_t cap, size_t *len)
{
    DBT k, v;
    int rc;

    for (;;) {
        input_dbt(&k, key, klen);
        memset(&v, 0, sizeof(v));
        v.data = buf;
        v.ulen = cap > UINT32_MAX ? UINT32_MAX : (u_int32_t)cap;
        v.flags = DB_DBT_USERMEM;
        rc = s->db->get(s->db, NULL, &k, &v, 0);
        if (!bdbshim_is_deadlock(rc))
            break;
    }
    *len = v.size;
    if (rc == DB_NOTFOUND || rc == DB_KEYEMPTY)
        return SHIM_NOTFOUND;
    if (rc == DB_BUFFER_SMALL)
        return SHIM_BUFFER_SMALL;
    return rc;
}

int bdbshim_cursor_open(struct bdbshim *s, struct bdbshim_cursor **out)
{
    struct bdbshim_cursor *c;
    int rc;

    *out = NULL;
    if ((c = calloc(1, sizeof(*c))) == NULL)
        return ENOMEM;
    c->store = s;
    if ((rc = s->db->cursor(s->db, NULL, &c->dbc, 0)) != 0) {
        free(c);
        return rc;
    }
    c->key.flags = DB_DBT_REALLOC;
    c->data.flags = DB_DBT_REALLOC;
    *out = c;
    return 0;
}

void bdbshim_cursor_close(struct bdbshim_cursor *c)
{
    if (c->dbc != NULL)
        (void)c->dbc->close(c->dbc);
    free(c->key.data);
    free(c->data.data);
    free(c->saved);
    free(c);
}

/* Copies `len` bytes into the cursor's saved key. */
static int save_key(struct bdbshim_cursor *c, const void *data, size_t len)
{
    if (len > c->saved_cap) {
        void *p = realloc(c->saved, len);
        if (p == NULL)
            return ENOMEM;
        c->saved = p;
        c->saved_cap = len;
    }
    if (len > 0)
        memcpy(c->saved, data, len);
    c->saved_len = len;
    c->have_saved = 1;
    return 0;
}

/*
 * Puts `len` bytes into the cursor's key buffer, as the input of DB_SET_RANGE.
 * Berkeley DB reallocates the buffer by the DBT's size alone, so its capacity
 * is unknown here: reallocate it to the exact length.
 */
static int set_input_key(struct bdbshim_cursor *c, const void *data, size_t len)
{
    void *p = realloc(c->key.data, len > 0 ? len : 1);

    if (p == NULL)
        return ENOMEM;
    c->key.data = p;
    if (len > 0)
        memcpy(c->key.data, data, len);
    c->key.size = (u_int32_t)len;
    return 0;
}

static int key_equals_saved(struct bdbshim_cursor *c)
{
    return c->key.size == c->saved_len &&
        (c->saved_len == 0 || memcmp(c->key.data, c->saved, c->saved_len) == 0);
}

/* Closes and reopens the Berkeley DB cursor, releasing its locks. */
static int reopen(struct bdbshim_cursor *c)
{
    DB *db = c->store->db;

    (void)c->dbc->close(c->dbc);
    c->dbc = NULL;
    return db->cursor(db, NULL, &c->dbc, 0);
}

/* One cursor get, mapping "not found" to SHIM_NOTFOUND. */
static int step(struct bdbshim_cursor *c, u_int32_t flag)
{
    int rc = c->dbc->get(c->dbc, &c->key, &c->data, flag);
    return rc == DB_NOTFOUND || rc == DB_KEYEMPTY ? SHIM_NOTFOUND : rc;
}

/*
 * After a deadlock, positions a fresh cursor at the entry after (or, with
 * `reverse`, before) the saved key.
 */
static int resume(struct bdbshim_cursor *c, int reverse)
{
    int rc;

    if ((rc = set_input_key(c, c->saved, c->saved_len)) != 0)
        return rc;
    rc = step(c, DB_SET_RANGE);
    if (rc == SHIM_NOTFOUND)
        /* No key at or after the saved one. */
        return reverse ? step(c, DB_LAST) : SHIM_NOTFOUND;
    if (rc != 0)
        return rc;
    if (reverse)
        return step(c, DB_PREV);
    return key_equals_saved(c) ? step(c, DB_NEXT) : 0;
}

/* Runs cursor operation `op` once. */
static int position(struct bdbshim_cursor *c, int op)
{
    int rc;

    switch (op) {
    case OP_FIRST:
        return step(c, DB_FIRST);
    case OP_LAST:
        return step(c, DB_LAST);
    case OP_NEXT:
        return step(c, DB_NEXT);
    case OP_PREV:
        return step(c, DB_PREV);
    case OP_SET_RANGE:
        if ((rc = set_input_key(c, c->saved, c->saved_len)) != 0)
            return rc;
        return step(c, DB_SET_RANGE);
    default:
        return EINVAL;
    }
}

/*
 * Moves the cursor: OP_FIRST, OP_LAST, OP_NEXT, OP_PREV, or OP_SET_RANGE to the
 * first key >= `seek`. On success `*k`/`*v` point at the entry, valid until the
 * next call on this cursor.
 */
int bdbshim_cursor_get(struct bdbshim_cursor *c, int op, const void *seek,
    size_t seek_len, const void **k, size_t *klen, const void **v, size_t *vlen)
{
    int rc;

    if (op == OP_SET_RANGE && (rc = save_key(c, seek, seek_len)) != 0)
        return rc;
    rc = position(c, op);
    /*
     * A deadlock with a writer in another thread chose this cursor to give
     * way: release its locks and carry on from the last key it returned.
     */
    while (bdbshim_is_deadlock(rc)) {
        if ((rc = reopen(c)) != 0)
            return rc;
        if ((op == OP_NEXT || op == OP_PREV) && c->have_saved)
            rc = resume(c, op == OP_PREV);
        else
            rc = position(c, op);
    }
    if (rc != 0)
        return rc;
    if ((rc = save_key(c, c->key.data, c->key.size)) != 0)
        return rc;
    *k = c->key.data;
    *klen = c->key.size;
    *v = c->data.data;
    *vlen = c->data.size;
    return 0;
}

/* DB->compact, returning freed pages to the file system, then a checkpoint. */
int bdbshim_compact(struct bdbshim *s)
{
    int rc;

    do
        rc = s->db->compact(s->db, NULL, NULL, NULL, NULL, DB_FREE_SPACE, NULL);
    while (bdbshim_is_deadlock(rc));
    if (rc != 0)
        return rc;
    return s->env->txn_checkpoint(s->env, 0, 0, 0);
}

/*
 * Berkeley DB's statistics of the database and its cache, as text in a
 * malloc'ed string (free with bdbshim_free). Returns NULL on failure.
 */
char *bdbshim_stats(struct bdbshim *s)
{
    char *text = NULL;
    size_t len = 0;
    FILE *fp = open_memstream(&text, &len);

    if (fp == NULL)
        return NULL;
    s->env->set_msgfile(s->env, fp);
    (void)s->db->stat_print(s->db, 0);
    (void)s->env->memp_stat_print(s->env, 0);
    s->env->set_msgfile(s->env, NULL);
    if (fclose(fp) != 0) {
        free(text);
        return NULL;
    }
    return text;
}

void bdbshim_free(void *p)
{
    free(p);
}
