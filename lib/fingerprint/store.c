// SPDX-License-Identifier: MIT
/*
 * The fingerprint store: one SQLite file.
 *
 *   device(id, identity UNIQUE, name, kind, driver, personality,
 *          fw_version, caps_hash, lib_version, updated)
 *   sample(device, family, op, variant, dtype, layout, p0..p7, threads,
 *          median_ns, p90_ns, min_ns, runs, work, rate, fell_back, stale,
 *          measured_at)       key: everything up to threads
 *   probe(device, name, x, y, stale, measured_at)   key: device, name, x
 *   run(id, device, started, grid, lib_version, clock_state, measured,
 *       skipped, fell_back, stale_marked, seconds)
 *
 * A device's identity is what names the slot (driver, name, render node,
 * device id); the versions (driver/backend, personality, firmware, a hash
 * of the capabilities, library build) are what a measurement depends on:
 * when one changes, every row of the device is marked stale (kept, so a
 * predictor may still use them, flagged) and re-measured by the next run.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"
#include "device/device.h"
#include "fingerprint/fp-impl.h"

#define FP_SCHEMA "1"

static const char *const family_names[] = {
	[MI_FP_CONV] = "conv",	     [MI_FP_DWCONV] = "dwconv",
	[MI_FP_GEMM] = "gemm",	     [MI_FP_POOL] = "pool",
	[MI_FP_ELTWISE] = "eltwise", [MI_FP_REORDER] = "reorder",
	[MI_FP_QUANT] = "quant",     [MI_FP_TRANSFER] = "transfer",
};
_Static_assert(sizeof(family_names) / sizeof(family_names[0]) ==
		       MI_FP_FAMILY_COUNT,
	       "a name per family");

const char *mi_fp_family_name(int family)
{
	return family >= 0 && family < MI_FP_FAMILY_COUNT ?
		       family_names[family] :
		       NULL;
}

int mi_fp_family_parse(const char *s)
{
	for (int i = 0; s && i < MI_FP_FAMILY_COUNT; i++)
		if (!strcmp(s, family_names[i]))
			return i;
	return -EINVAL;
}

static const char schema[] =
	"PRAGMA journal_mode=WAL;"
	"PRAGMA synchronous=NORMAL;"
	"CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT);"
	"CREATE TABLE IF NOT EXISTS device(id INTEGER PRIMARY KEY,"
	" identity TEXT UNIQUE NOT NULL, name TEXT, kind TEXT, driver TEXT,"
	" personality TEXT, fw_version INTEGER, caps_hash TEXT,"
	" lib_version TEXT, updated INTEGER);"
	"CREATE TABLE IF NOT EXISTS sample(device INTEGER NOT NULL,"
	" family TEXT NOT NULL, op TEXT NOT NULL, variant TEXT NOT NULL,"
	" dtype TEXT NOT NULL, layout TEXT NOT NULL,"
	" p0 INTEGER, p1 INTEGER, p2 INTEGER, p3 INTEGER, p4 INTEGER,"
	" p5 INTEGER, p6 INTEGER, p7 INTEGER, threads INTEGER,"
	" median_ns REAL, p90_ns REAL, min_ns REAL, runs INTEGER, work REAL,"
	" rate REAL, fell_back INTEGER, stale INTEGER NOT NULL DEFAULT 0,"
	" measured_at INTEGER,"
	" PRIMARY KEY(device, family, op, variant, dtype, layout,"
	"  p0, p1, p2, p3, p4, p5, p6, p7, threads));"
	"CREATE TABLE IF NOT EXISTS probe(device INTEGER NOT NULL,"
	" name TEXT NOT NULL, x REAL NOT NULL, y REAL,"
	" stale INTEGER NOT NULL DEFAULT 0, measured_at INTEGER,"
	" PRIMARY KEY(device, name, x));"
	"CREATE TABLE IF NOT EXISTS run(id INTEGER PRIMARY KEY, device INTEGER,"
	" started INTEGER, grid TEXT, lib_version TEXT, clock_state TEXT,"
	" measured INTEGER, skipped INTEGER, fell_back INTEGER,"
	" stale_marked INTEGER, seconds REAL);"
	"INSERT OR IGNORE INTO meta VALUES('schema', '" FP_SCHEMA "');";

static int db_err(struct mi_fp_db *db, const char *what)
{
	return mi_set_error(-EIO, "fingerprint DB: %s: %s", what,
			    sqlite3_errmsg(db->db));
}

int mi_fp_exec(struct mi_fp_db *db, const char *sql)
{
	char *msg = NULL;

	if (sqlite3_exec(db->db, sql, NULL, NULL, &msg) != SQLITE_OK) {
		int err = mi_set_error(-EIO, "fingerprint DB: %s",
				       msg ? msg : "error");

		sqlite3_free(msg);
		return err;
	}
	return 0;
}

int mi_fp_db_open(const char *path, struct mi_fp_db **dbp)
{
	struct mi_fp_db *db;
	sqlite3_stmt *st = NULL;
	int err;

	if (!path || !*path || !dbp)
		return mi_set_error(-EINVAL, "fingerprint DB: no path");
	db = calloc(1, sizeof(*db));
	if (!db)
		return -ENOMEM;
	if (sqlite3_open_v2(path, &db->db,
			    SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE,
			    NULL) != SQLITE_OK) {
		err = mi_set_error(-EIO, "fingerprint DB %s: %s", path,
				   db->db ? sqlite3_errmsg(db->db) :
					    "cannot open");
		goto err_close;
	}
	sqlite3_busy_timeout(db->db, 5000);
	err = mi_fp_exec(db, schema);
	if (err) {
		mi_set_error(-EIO, "fingerprint DB %s: %s", path,
			     sqlite3_errmsg(db->db));
		goto err_close;
	}
	if (sqlite3_prepare_v2(db->db,
			       "SELECT value FROM meta WHERE key='schema'", -1,
			       &st, NULL) == SQLITE_OK &&
	    sqlite3_step(st) == SQLITE_ROW &&
	    strcmp((const char *)sqlite3_column_text(st, 0), FP_SCHEMA)) {
		err = mi_set_error(-EPROTO, "fingerprint DB %s: schema %s, not %s",
				   path, sqlite3_column_text(st, 0), FP_SCHEMA);
		sqlite3_finalize(st);
		goto err_close;
	}
	sqlite3_finalize(st);
	*dbp = db;
	return 0;

err_close:
	sqlite3_close(db->db);
	free(db);
	return err;
}

void mi_fp_db_close(struct mi_fp_db *db)
{
	if (!db)
		return;
	sqlite3_close(db->db);
	free(db);
}

static uint64_t fnv1a(const void *p, size_t n, uint64_t h)
{
	const unsigned char *c = p;

	for (size_t i = 0; i < n; i++)
		h = (h ^ c[i]) * 0x100000001b3ull;
	return h;
}

void mi_fp_versions_of(struct mi_dev *d, const char *lib_version,
		       struct fp_versions *v)
{
	memset(v, 0, sizeof(*v));
	snprintf(v->driver, sizeof(v->driver), "%s/%s", d->driver, d->backend);
	snprintf(v->personality, sizeof(v->personality), "%s", d->personality);
	v->fw_version = d->caps.fw_version;
	v->caps_hash = fnv1a(&d->caps, sizeof(d->caps), 0xcbf29ce484222325ull);
	snprintf(v->lib_version, sizeof(v->lib_version), "%s",
		 lib_version ? lib_version : mi_fp_lib_version());
}

static void identity_of(struct mi_dev *d, char *buf, size_t len)
{
	snprintf(buf, len, "%s/%s/%s/%llx", d->driver, d->name, d->node,
		 (unsigned long long)d->caps.device_id);
}

static const char *col_text(sqlite3_stmt *st, int i)
{
	const unsigned char *t = sqlite3_column_text(st, i);

	return t ? (const char *)t : "";
}

int mi_fp_dev_row(struct mi_fp_db *db, struct mi_dev *d,
		  const struct fp_versions *v, bool create, int64_t *id,
		  bool *changed)
{
	sqlite3_stmt *st = NULL;
	char ident[256], hash[24];
	int rc, err = 0;

	*changed = false;
	identity_of(d, ident, sizeof(ident));
	snprintf(hash, sizeof(hash), "%016llx",
		 (unsigned long long)v->caps_hash);
	if (sqlite3_prepare_v2(db->db,
			       "SELECT id, driver, personality, fw_version,"
			       " caps_hash, lib_version FROM device"
			       " WHERE identity = ?1",
			       -1, &st, NULL) != SQLITE_OK)
		return db_err(db, "device lookup");
	sqlite3_bind_text(st, 1, ident, -1, SQLITE_TRANSIENT);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		*id = sqlite3_column_int64(st, 0);
		*changed = strcmp(col_text(st, 1), v->driver) ||
			   strcmp(col_text(st, 2), v->personality) ||
			   (uint64_t)sqlite3_column_int64(st, 3) !=
				   v->fw_version ||
			   strcmp(col_text(st, 4), hash) ||
			   strcmp(col_text(st, 5), v->lib_version);
		sqlite3_finalize(st);
		if (!*changed)
			return 0;
		if (!create)
			return 0; /* the check reports it; a run updates */
		err = mi_fp_mark_stale(db, *id, -1);
		if (err < 0)
			return err;
		if (sqlite3_prepare_v2(db->db,
				       "UPDATE device SET driver=?2,"
				       " personality=?3, fw_version=?4,"
				       " caps_hash=?5, lib_version=?6,"
				       " updated=?7 WHERE id=?1",
				       -1, &st, NULL) != SQLITE_OK)
			return db_err(db, "device update");
		sqlite3_bind_int64(st, 1, *id);
	} else {
		sqlite3_finalize(st);
		if (rc != SQLITE_DONE)
			return db_err(db, "device lookup");
		if (!create)
			return mi_set_error(-ENOENT,
					    "%s: no fingerprint in the DB (run "
					    "metainfer fingerprint)",
					    d->name);
		if (sqlite3_prepare_v2(db->db,
				       "INSERT INTO device(identity, driver,"
				       " personality, fw_version, caps_hash,"
				       " lib_version, updated, name, kind)"
				       " VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8,"
				       " ?9)",
				       -1, &st, NULL) != SQLITE_OK)
			return db_err(db, "device insert");
		sqlite3_bind_text(st, 1, ident, -1, SQLITE_TRANSIENT);
		sqlite3_bind_text(st, 8, d->name, -1, SQLITE_TRANSIENT);
		sqlite3_bind_text(st, 9,
				  d->kind == MI_DEV_CPU	   ? "cpu" :
				  d->kind == MI_DEV_KERNEL ? "npu" :
							     "emulation",
				  -1, SQLITE_STATIC);
	}
	sqlite3_bind_text(st, 2, v->driver, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(st, 3, v->personality, -1, SQLITE_TRANSIENT);
	sqlite3_bind_int64(st, 4, (int64_t)v->fw_version);
	sqlite3_bind_text(st, 5, hash, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(st, 6, v->lib_version, -1, SQLITE_TRANSIENT);
	sqlite3_bind_int64(st, 7, (int64_t)time(NULL));
	rc = sqlite3_step(st);
	sqlite3_finalize(st);
	if (rc != SQLITE_DONE)
		return db_err(db, "device write");
	if (!*changed)
		*id = sqlite3_last_insert_rowid(db->db);
	return 0;
}

#define KEY_WHERE                                                          \
	" device=?1 AND family=?2 AND op=?3 AND variant=?4 AND dtype=?5"   \
	" AND layout=?6 AND p0=?7 AND p1=?8 AND p2=?9 AND p3=?10 AND"      \
	" p4=?11 AND p5=?12 AND p6=?13 AND p7=?14 AND threads=?15"

static void bind_key(sqlite3_stmt *st, int64_t dev,
		     const struct mi_fp_sample *s)
{
	sqlite3_bind_int64(st, 1, dev);
	sqlite3_bind_text(st, 2, mi_fp_family_name(s->family), -1,
			  SQLITE_STATIC);
	sqlite3_bind_text(st, 3, s->op, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(st, 4, s->variant, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(st, 5, s->dtype, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(st, 6, s->layout, -1, SQLITE_TRANSIENT);
	for (int i = 0; i < MI_FP_NPARAM; i++)
		sqlite3_bind_int64(st, 7 + i, s->p[i]);
	sqlite3_bind_int(st, 15, s->threads);
}

#define SAMPLE_COLS                                                        \
	"family, op, variant, dtype, layout, p0, p1, p2, p3, p4, p5, p6, p7," \
	" threads, median_ns, p90_ns, min_ns, runs, work, rate, fell_back,"   \
	" stale"

static void read_sample(sqlite3_stmt *st, struct mi_fp_sample *s)
{
	memset(s, 0, sizeof(*s));
	s->family = mi_fp_family_parse(col_text(st, 0));
	snprintf(s->op, sizeof(s->op), "%s", col_text(st, 1));
	snprintf(s->variant, sizeof(s->variant), "%s", col_text(st, 2));
	snprintf(s->dtype, sizeof(s->dtype), "%s", col_text(st, 3));
	snprintf(s->layout, sizeof(s->layout), "%s", col_text(st, 4));
	for (int i = 0; i < MI_FP_NPARAM; i++)
		s->p[i] = sqlite3_column_int64(st, 5 + i);
	s->threads = sqlite3_column_int(st, 13);
	s->median_ns = sqlite3_column_double(st, 14);
	s->p90_ns = sqlite3_column_double(st, 15);
	s->min_ns = sqlite3_column_double(st, 16);
	s->runs = sqlite3_column_int(st, 17);
	s->work = sqlite3_column_double(st, 18);
	s->rate = sqlite3_column_double(st, 19);
	s->fell_back = sqlite3_column_int(st, 20);
	s->stale = sqlite3_column_int(st, 21);
}

int mi_fp_sample_get(struct mi_fp_db *db, int64_t dev,
		     const struct mi_fp_sample *key, struct mi_fp_sample *out)
{
	sqlite3_stmt *st;
	int rc, fresh = 0;

	if (sqlite3_prepare_v2(db->db,
			       "SELECT " SAMPLE_COLS " FROM sample WHERE"
			       KEY_WHERE,
			       -1, &st, NULL) != SQLITE_OK)
		return db_err(db, "sample lookup");
	bind_key(st, dev, key);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		struct mi_fp_sample s;

		read_sample(st, &s);
		fresh = !s.stale;
		if (out)
			*out = s;
	}
	sqlite3_finalize(st);
	if (rc != SQLITE_ROW && rc != SQLITE_DONE)
		return db_err(db, "sample lookup");
	return fresh;
}

int mi_fp_sample_put(struct mi_fp_db *db, int64_t dev,
		     const struct mi_fp_sample *s)
{
	sqlite3_stmt *st;
	int rc;

	if (sqlite3_prepare_v2(db->db,
			       "INSERT OR REPLACE INTO sample(device, "
			       SAMPLE_COLS ", measured_at) VALUES(?1, ?2, ?3,"
			       " ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13,"
			       " ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21, ?22,"
			       " 0, ?23)",
			       -1, &st, NULL) != SQLITE_OK)
		return db_err(db, "sample insert");
	bind_key(st, dev, s);
	sqlite3_bind_double(st, 16, s->median_ns);
	sqlite3_bind_double(st, 17, s->p90_ns);
	sqlite3_bind_double(st, 18, s->min_ns);
	sqlite3_bind_int(st, 19, s->runs);
	sqlite3_bind_double(st, 20, s->work);
	sqlite3_bind_double(st, 21, s->rate);
	sqlite3_bind_int(st, 22, s->fell_back);
	sqlite3_bind_int64(st, 23, (int64_t)time(NULL));
	rc = sqlite3_step(st);
	sqlite3_finalize(st);
	return rc == SQLITE_DONE ? 0 : db_err(db, "sample insert");
}

int mi_fp_probe_fresh(struct mi_fp_db *db, int64_t dev, const char *name,
		      double x)
{
	sqlite3_stmt *st;
	int rc, fresh = 0;

	if (sqlite3_prepare_v2(db->db,
			       "SELECT stale FROM probe WHERE device=?1 AND"
			       " name=?2 AND x=?3",
			       -1, &st, NULL) != SQLITE_OK)
		return db_err(db, "probe lookup");
	sqlite3_bind_int64(st, 1, dev);
	sqlite3_bind_text(st, 2, name, -1, SQLITE_TRANSIENT);
	sqlite3_bind_double(st, 3, x);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW)
		fresh = !sqlite3_column_int(st, 0);
	sqlite3_finalize(st);
	return fresh;
}

int mi_fp_probe_put(struct mi_fp_db *db, int64_t dev, const char *name,
		    double x, double y)
{
	sqlite3_stmt *st;
	int rc;

	if (sqlite3_prepare_v2(db->db,
			       "INSERT OR REPLACE INTO probe VALUES(?1, ?2,"
			       " ?3, ?4, 0, ?5)",
			       -1, &st, NULL) != SQLITE_OK)
		return db_err(db, "probe insert");
	sqlite3_bind_int64(st, 1, dev);
	sqlite3_bind_text(st, 2, name, -1, SQLITE_TRANSIENT);
	sqlite3_bind_double(st, 3, x);
	sqlite3_bind_double(st, 4, y);
	sqlite3_bind_int64(st, 5, (int64_t)time(NULL));
	rc = sqlite3_step(st);
	sqlite3_finalize(st);
	return rc == SQLITE_DONE ? 0 : db_err(db, "probe insert");
}

/* Probes fed by a family: re-measured with it. */
static const char *probe_of_family(int family)
{
	switch (family) {
	case MI_FP_CONV:
	case MI_FP_DWCONV:
		return "dw";
	case MI_FP_GEMM:
		return "gemm";
	case MI_FP_ELTWISE:
	case MI_FP_TRANSFER:
		return "bw";
	default:
		return NULL;
	}
}

static int mark(struct mi_fp_db *db, const char *sql, int64_t dev,
		const char *arg)
{
	sqlite3_stmt *st;
	int rc;

	if (sqlite3_prepare_v2(db->db, sql, -1, &st, NULL) != SQLITE_OK)
		return db_err(db, "mark stale");
	sqlite3_bind_int64(st, 1, dev);
	if (arg)
		sqlite3_bind_text(st, 2, arg, -1, SQLITE_TRANSIENT);
	rc = sqlite3_step(st);
	sqlite3_finalize(st);
	if (rc != SQLITE_DONE)
		return db_err(db, "mark stale");
	return sqlite3_changes(db->db);
}

int mi_fp_mark_stale(struct mi_fp_db *db, int64_t dev, int family)
{
	const char *fam = mi_fp_family_name(family), *pr;
	int n, m;

	if (family < 0) {
		n = mark(db, "UPDATE sample SET stale=1 WHERE device=?1", dev,
			 NULL);
		m = n < 0 ? n :
			    mark(db, "UPDATE probe SET stale=1 WHERE device=?1",
				 dev, NULL);
		return m < 0 ? m : n + m;
	}
	if (!fam)
		return mi_set_error(-EINVAL, "no family %d", family);
	n = mark(db, "UPDATE sample SET stale=1 WHERE device=?1 AND family=?2",
		 dev, fam);
	pr = probe_of_family(family);
	if (n < 0 || !pr)
		return n;
	m = mark(db, "UPDATE probe SET stale=1 WHERE device=?1 AND name=?2",
		 dev, pr);
	return m < 0 ? m : n + m;
}

int mi_fp_run_log(struct mi_fp_db *db, int64_t dev, const char *grid,
		  const struct mi_fp_report *rep)
{
	sqlite3_stmt *st;
	int rc;

	if (sqlite3_prepare_v2(db->db,
			       "INSERT INTO run(device, started, grid,"
			       " lib_version, clock_state, measured, skipped,"
			       " fell_back, stale_marked, seconds)"
			       " VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9,"
			       " ?10)",
			       -1, &st, NULL) != SQLITE_OK)
		return db_err(db, "run log");
	sqlite3_bind_int64(st, 1, dev);
	sqlite3_bind_int64(st, 2, (int64_t)time(NULL));
	sqlite3_bind_text(st, 3, grid, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 4, mi_fp_lib_version(), -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 5, rep->clock_state, -1, SQLITE_TRANSIENT);
	sqlite3_bind_int(st, 6, rep->measured);
	sqlite3_bind_int(st, 7, rep->skipped);
	sqlite3_bind_int(st, 8, rep->fell_back);
	sqlite3_bind_int(st, 9, rep->stale_marked);
	sqlite3_bind_double(st, 10, rep->seconds);
	rc = sqlite3_step(st);
	sqlite3_finalize(st);
	return rc == SQLITE_DONE ? 0 : db_err(db, "run log");
}

/* The device row for reading: -ENOENT if d was never fingerprinted. */
static int dev_for_read(struct mi_fp_db *db, struct mi_dev *d, int64_t *id)
{
	struct fp_versions v;
	bool changed;

	mi_fp_versions_of(d, NULL, &v);
	return mi_fp_dev_row(db, d, &v, false, id, &changed);
}

int mi_fp_lookup(struct mi_fp_db *db, struct mi_dev *d, int family,
		 const char *op, const char *variant,
		 struct mi_fp_sample *samples, int max)
{
	sqlite3_stmt *st;
	int64_t id;
	int err, n = 0, rc;

	if (!db || !d)
		return mi_set_error(-EINVAL, "mi_fp_lookup: bad arguments");
	err = dev_for_read(db, d, &id);
	if (err)
		return err;
	if (sqlite3_prepare_v2(db->db,
			       "SELECT " SAMPLE_COLS " FROM sample WHERE"
			       " device=?1 AND (?2 IS NULL OR family=?2) AND"
			       " (?3 IS NULL OR op=?3) AND"
			       " (?4 IS NULL OR variant=?4)"
			       " ORDER BY family, op, p0, p1, p2, p3, p4, p5,"
			       " variant",
			       -1, &st, NULL) != SQLITE_OK)
		return db_err(db, "lookup");
	sqlite3_bind_int64(st, 1, id);
	if (family >= 0)
		sqlite3_bind_text(st, 2, mi_fp_family_name(family), -1,
				  SQLITE_STATIC);
	if (op)
		sqlite3_bind_text(st, 3, op, -1, SQLITE_TRANSIENT);
	if (variant)
		sqlite3_bind_text(st, 4, variant, -1, SQLITE_TRANSIENT);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		if (samples && n < max)
			read_sample(st, &samples[n]);
		n++;
	}
	sqlite3_finalize(st);
	return rc == SQLITE_DONE ? n : db_err(db, "lookup");
}

int mi_fp_probes(struct mi_fp_db *db, struct mi_dev *d, const char *name,
		 struct mi_fp_probe *probes, int max)
{
	sqlite3_stmt *st;
	int64_t id;
	int err, n = 0, rc;

	if (!db || !d)
		return mi_set_error(-EINVAL, "mi_fp_probes: bad arguments");
	err = dev_for_read(db, d, &id);
	if (err)
		return err;
	if (sqlite3_prepare_v2(db->db,
			       "SELECT name, x, y FROM probe WHERE device=?1"
			       " AND (?2 IS NULL OR name=?2) ORDER BY name, x",
			       -1, &st, NULL) != SQLITE_OK)
		return db_err(db, "probes");
	sqlite3_bind_int64(st, 1, id);
	if (name)
		sqlite3_bind_text(st, 2, name, -1, SQLITE_TRANSIENT);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		if (probes && n < max) {
			snprintf(probes[n].name, sizeof(probes[n].name), "%s",
				 col_text(st, 0));
			probes[n].x = sqlite3_column_double(st, 1);
			probes[n].y = sqlite3_column_double(st, 2);
		}
		n++;
	}
	sqlite3_finalize(st);
	return rc == SQLITE_DONE ? n : db_err(db, "probes");
}
