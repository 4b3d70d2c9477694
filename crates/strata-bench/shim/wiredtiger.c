/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * A small C shim over WiredTiger 3.2 for db_bench's `wiredtiger-btree` and
 * `wiredtiger-lsm` engines (src/engine/wiredtiger.rs). WiredTiger's handles
 * are structs of function pointers, which Rust cannot call as plain symbols;
 * these functions call them.
 *
 * Every function returns 0 or a WiredTiger (or errno) error code; WT_NOTFOUND
 * and WT_ROLLBACK are passed through for the caller to act on.
 *
 * A wtshim_session is one WT_SESSION with one cursor on the table. Sessions
 * are not thread-safe: the caller uses each from one thread at a time.
 */

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <wiredtiger.h>

struct wtshim_session {
    WT_SESSION *session;
    /* The session's cursor on the table, for puts, gets and scans. */
    WT_CURSOR *cursor;
    /* The table's URI, for the new cursor of each seek. */
    char *uri;
};

const char *wtshim_strerror(struct wtshim_session *s, int rc)
{
    /* WT_SESSION::strerror is thread-safe; wiredtiger_strerror is not. */
    if (s != NULL)
        return s->session->strerror(s->session, rc);
    return wiredtiger_strerror(rc);
}

int wtshim_notfound(void)
{
    return WT_NOTFOUND;
}

int wtshim_rollback(void)
{
    return WT_ROLLBACK;
}

int wtshim_open(const char *home, const char *config, WT_CONNECTION **out)
{
    *out = NULL;
    return wiredtiger_open(home, NULL, config, out);
}

int wtshim_close(WT_CONNECTION *conn)
{
    /* Closes every session, and writes a final checkpoint. */
    return conn->close(conn, NULL);
}

/* Creates the table `uri` with `config` (nothing happens if it exists). */
int wtshim_create(WT_CONNECTION *conn, const char *uri, const char *config)
{
    WT_SESSION *session;
    int rc, t;

    if ((rc = conn->open_session(conn, NULL, NULL, &session)) != 0)
        return rc;
    rc = session->create(session, uri, config);
    if ((t = session->close(session, NULL)) != 0 && rc == 0)
        rc = t;
    return rc;
}

int wtshim_session_open(WT_CONNECTION *conn, const char *uri,
    struct wtshim_session **out)
{
    struct wtshim_session *s;
    int rc;

    *out = NULL;
    if ((s = calloc(1, sizeof(*s))) == NULL)
        return ENOMEM;
    if ((s->uri = strdup(uri)) == NULL) {
        free(s);
        return ENOMEM;
    }
    if ((rc = conn->open_session(conn, NULL, NULL, &s->session)) != 0)
        goto fail;
    if ((rc = s->session->open_cursor(s->session, uri, NULL, NULL, &s->cursor)) != 0) {
        (void)s->session->close(s->session, NULL);
        goto fail;
    }
    *out = s;
    return 0;

fail:
    free(s->uri);
    free(s);
    return rc;
}

int wtshim_session_close(struct wtshim_session *s)
{
    /* Closing the session closes its cursor. */
    int rc = s->session->close(s->session, NULL);

    free(s->uri);
    free(s);
    return rc;
}

int wtshim_begin(struct wtshim_session *s)
{
    return s->session->begin_transaction(s->session, NULL);
}

/*
 * Commits the session's transaction. The connection writes each commit's log
 * records to the operating system without fsync (transaction_sync=(enabled=
 * true,method=none)). If the commit fails, the transaction has been rolled back.
 */
int wtshim_commit(struct wtshim_session *s)
{
    return s->session->commit_transaction(s->session, NULL);
}

/*
 * Flushes the log to stable storage (fsync) through the last commit, whatever
 * the connection's transaction_sync method: what makes a `sync` write durable.
 */
int wtshim_log_sync(struct wtshim_session *s)
{
    return s->session->log_flush(s->session, "sync=on");
}

int wtshim_rollback_txn(struct wtshim_session *s)
{
    return s->session->rollback_transaction(s->session, NULL);
}

int wtshim_put(struct wtshim_session *s, const void *key, size_t klen,
    const void *val, size_t vlen)
{
    WT_CURSOR *c = s->cursor;
    WT_ITEM k, v;

    memset(&k, 0, sizeof(k));
    memset(&v, 0, sizeof(v));
    k.data = key;
    k.size = klen;
    v.data = val;
    v.size = vlen;
    c->set_key(c, &k);
    c->set_value(c, &v);
    /* The cursor has overwrite=true (the default): insert overwrites. */
    return c->insert(c);
}

int wtshim_remove(struct wtshim_session *s, const void *key, size_t klen)
{
    WT_CURSOR *c = s->cursor;
    WT_ITEM k;
    int rc;

    /* WiredTiger does not permit empty keys, so none is stored. */
    if (klen == 0)
        return 0;
    memset(&k, 0, sizeof(k));
    k.data = key;
    k.size = klen;
    c->set_key(c, &k);
    rc = c->remove(c);
    return rc == WT_NOTFOUND ? 0 : rc;
}

/*
 * Looks `key` up. On success `*val`/`*vlen` point into the cursor, valid until
 * wtshim_reset or the next operation on this session.
 */
int wtshim_get(struct wtshim_session *s, const void *key, size_t klen,
    const void **val, size_t *vlen)
{
    WT_CURSOR *c = s->cursor;
    WT_ITEM k, v;
    int rc;

    /* WiredTiger does not permit empty keys, so none is stored. */
    if (klen == 0)
        return WT_NOTFOUND;
    memset(&k, 0, sizeof(k));
    k.data = key;
    k.size = klen;
    c->set_key(c, &k);
    if ((rc = c->search(c)) != 0)
        return rc;
    if ((rc = c->get_value(c, &v)) != 0)
        return rc;
    *val = v.data;
    *vlen = v.size;
    return 0;
}

/* Releases the session cursor's position (and the page it pins). */
int wtshim_reset(struct wtshim_session *s)
{
    return s->cursor->reset(s->cursor);
}

/*
 * Moves the session cursor to the next entry (or, with `reverse`, the previous
 * one). From a reset cursor that is the first (last) entry. Returns
 * WT_NOTFOUND past the end.
 */
int wtshim_step(struct wtshim_session *s, int reverse, const void **key,
    size_t *klen, const void **val, size_t *vlen)
{
    WT_CURSOR *c = s->cursor;
    WT_ITEM k, v;
    int rc;

    rc = reverse ? c->prev(c) : c->next(c);
    if (rc != 0)
        return rc;
    if ((rc = c->get_key(c, &k)) != 0 || (rc = c->get_value(c, &v)) != 0)
        return rc;
    *key = k.data;
    *klen = k.size;
    *val = v.data;
    *vlen = v.size;
    return 0;
}

/*
 * Opens a new cursor and positions it at the first key >= `key`. On success
 * `*cursor` is the new cursor, which the caller closes with
 * wtshim_cursor_close, and `*found`/`*flen` point at its key until then. On
 * WT_NOTFOUND (no such key) the cursor has been closed.
 */
int wtshim_seek(struct wtshim_session *s, const void *key, size_t klen,
    WT_CURSOR **cursor, const void **found, size_t *flen)
{
    WT_CURSOR *c;
    WT_ITEM k;
    int exact, rc;

    *cursor = NULL;
    if ((rc = s->session->open_cursor(s->session, s->uri, NULL, NULL, &c)) != 0)
        return rc;
    if (klen == 0) {
        /* WiredTiger has no empty keys: every key is >= the empty one. */
        rc = c->next(c);
    } else {
        memset(&k, 0, sizeof(k));
        k.data = key;
        k.size = klen;
        c->set_key(c, &k);
        rc = c->search_near(c, &exact);
        /* search_near lands on a neighbour: step forward if it is smaller. */
        if (rc == 0 && exact < 0)
            rc = c->next(c);
    }
    if (rc == 0)
        rc = c->get_key(c, &k);
    if (rc != 0) {
        (void)c->close(c);
        return rc;
    }
    *cursor = c;
    *found = k.data;
    *flen = k.size;
    return 0;
}

int wtshim_cursor_close(WT_CURSOR *c)
{
    return c->close(c);
}

/*
 * WT_SESSION::compact on table `uri`, in a session of its own: a B-tree
 * rewrites its file to return free space; an LSM tree merges its chunks.
 */
int wtshim_compact(WT_CONNECTION *conn, const char *uri)
{
    WT_SESSION *session;
    int rc, t;

    if ((rc = conn->open_session(conn, NULL, NULL, &session)) != 0)
        return rc;
    rc = session->compact(session, uri, NULL);
    if ((t = session->close(session, NULL)) != 0 && rc == 0)
        rc = t;
    return rc;
}
