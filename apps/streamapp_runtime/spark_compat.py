"""Every use of Spark's internals (py4j, ``_jvm``, ``_jdf``, ``_gateway``, internal property names)
in one place, so that a Spark upgrade has one module to re-check; tests/runtime/test_spark_assumptions.py
asserts each behaviour the runtime leans on, on the Spark the project pins.
"""

from __future__ import annotations

import logging

log = logging.getLogger("streamapp.runtime")

# Set by Spark on the thread that runs a query's micro-batches, so foreachBatch functions see it: the
# query's id, which its checkpoint keeps for its whole life (a new checkpoint gets a new one).
QUERY_ID_PROPERTY = "sql.streaming.queryId"


def query_id(df) -> str | None:
    """The id of the streaming query whose micro-batch ``df`` is (inside foreachBatch), else None."""
    return df.sparkSession.sparkContext.getLocalProperty(QUERY_ID_PROPERTY)


def arrow_schema(ddl: str):
    """The pyarrow schema Spark converts a pandas frame of these columns to (a DDL string, as
    mapInPandas takes it); parsed by the session's JVM, so on the driver."""
    from pyspark.sql.pandas.types import to_arrow_schema
    from pyspark.sql.types import StructType, _parse_datatype_string

    parsed = _parse_datatype_string(ddl)
    assert isinstance(parsed, StructType), ddl
    return to_arrow_schema(parsed, timezone="UTC")  # a check of what converts: any zone does


def jvm_stack_trace(exc) -> str:
    """The JVM stack of a query's exception with its causes ('Caused by: …'), when Spark gives one."""
    return getattr(exc, "_stackTrace", None) or ""


def set_jvm_log_level(spark, logger: str, level: str) -> None:
    """One log4j2 logger of the driver's JVM to ``level`` (ERROR, WARN, …)."""
    jvm = spark.sparkContext._jvm
    jvm.org.apache.logging.log4j.core.config.Configurator.setLevel(logger, getattr(jvm.org.apache.logging.log4j.Level, level))


def running_session():
    """This process's SparkSession, or None: the thread's active one, else the default one. A thread
    py4j or Spark started may have no active session while the process runs one (the driver's)."""
    from pyspark.errors import PySparkRuntimeError
    from pyspark.sql import SparkSession

    try:
        return SparkSession.active()
    except PySparkRuntimeError:  # NO_ACTIVE_OR_DEFAULT_SESSION
        return None


def shut_down_jvm(spark) -> None:
    """Stop Spark and its JVM now, not when Python exits: pyspark keeps the gateway (and the JVM
    process) for the next session otherwise, and a test run or a stopped driver must leave nothing."""
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    spark.stop()
    if gateway is not None:
        gateway.shutdown()
        proc = getattr(gateway, "proc", None)
        if proc is not None:
            proc.stdin.close()
            try:
                proc.wait(timeout=15)
            except Exception:  # noqa: BLE001 - a JVM that does not exit is killed
                proc.kill()
        SparkContext._gateway = None
        SparkContext._jvm = None


# --- Catalyst: the analyzed plan of a DataFrame ---------------------------------------------------

def _seq(scala_seq) -> list:
    return [scala_seq.apply(i) for i in range(scala_seq.size())]


def _simple_name(obj) -> str:
    return obj.getClass().getSimpleName()


def _find_aggregate(logical_plan):
    todo = [logical_plan]
    while todo:
        node = todo.pop(0)
        if _simple_name(node) == "Aggregate":
            return node
        todo.extend(_seq(node.children()))
    return None


def _buffers(agg_expression) -> tuple[str, tuple[str, ...]]:
    fn = agg_expression.aggregateFunction()
    try:
        attrs = fn.aggBufferAttributes()
    except Exception:  # RuntimeReplaceableAggregate (count_if, ...): the replacement keeps the state
        fn = fn.replacement()
        attrs = fn.aggBufferAttributes()
    return _simple_name(fn), tuple(a.name() for a in _seq(attrs))


def aggregate_buffers(df) -> list[tuple[str, str, tuple[str, ...]]] | None:
    """Per output column of the first Aggregate in the analyzed plan of ``df`` (not started): (column,
    the aggregate function's class when the column is one aggregate, the buffer names it adds to the
    state value). Catalyst through py4j (``_jdf``): streamapp state reads it to name state columns.

    Buffers appear in the state value in the order Spark collects distinct aggregate expressions
    from the output; an expression used by two columns is kept once (its buffers go to the first).
    None for a plan of another shape.
    """
    try:
        node = _find_aggregate(df._jdf.queryExecution().analyzed())
        if node is None:
            return None
        seen: list = []
        found: list[tuple[str, str, tuple[str, ...]]] = []
        for named in _seq(node.aggregateExpressions()):
            top = named.child() if _simple_name(named) == "Alias" else named
            aggs, todo = [], [top]
            while todo:
                expr = todo.pop(0)
                if _simple_name(expr) == "AggregateExpression":
                    aggs.append(expr)
                else:
                    todo.extend(_seq(expr.children()))
            names: list[str] = []
            fn_name = ""
            for a in aggs:
                if any(a.semanticEquals(s) for s in seen):
                    continue
                seen.append(a)
                fn_name, bufs = _buffers(a)
                names.extend(bufs)
            direct_fn = fn_name if _simple_name(top) == "AggregateExpression" and names else ""
            found.append((named.name(), direct_fn, tuple(names)))
        return found
    except Exception:  # noqa: BLE001 - an unexpected plan shape
        return None


def executor_count(spark) -> int:
    """Executors registered with the driver now (PySpark's StatusTracker has no executor list); 0 when
    the context is gone or local (the driver is no executor of its own)."""
    try:
        return max(0, len(spark.sparkContext._jsc.sc().statusTracker().getExecutorInfos()) - 1)
    except Exception:  # noqa: BLE001 - a metric read while the context stops
        return 0


# --- Executor allocation: rescale in place (run/rescale.py) ----------------------------------------
# SparkContext's developer API and the scheduler backend (an ExecutorAllocationClient on Kubernetes and
# standalone): PySpark exposes none of it.

def request_total_executors(spark, total: int) -> bool:
    """Ask the cluster manager for ``total`` executors in all (pending pods beyond it are dropped;
    running executors are left to ``decommission_executors``). False when the backend cannot."""
    sc = spark.sparkContext
    no_locality = sc._jvm.org.apache.spark.api.python.PythonUtils.toScalaMap(sc._jvm.java.util.HashMap())
    return bool(sc._jsc.sc().requestTotalExecutors(total, 0, no_locality))


def active_executors(spark) -> list[tuple[str, bool]]:
    """(id, running a task now) of each executor registered and not on its way out (decommissioning,
    being removed or lost)."""
    context = spark.sparkContext._jsc.sc()
    backend, scheduler = context.schedulerBackend(), context.taskScheduler()
    ids = backend.getExecutorIds()
    found = []
    for i in range(ids.size()):
        executor = ids.apply(i)
        if backend.isExecutorActive(executor):
            found.append((executor, bool(scheduler.isExecutorBusy(executor))))
    return found


def decommission_executors(spark, executors: list[str], why: str) -> list[str]:
    """Decommission these executors gracefully, keeping the requested total as it is (set it first with
    ``request_total_executors``): each takes no new task, finishes its running ones, migrates its shuffle
    blocks (spark.storage.decommission.*) and exits. The ids it was started for."""
    sc = spark.sparkContext
    jvm = sc._jvm
    backend = sc._jsc.sc().schedulerBackend()
    info = jvm.org.apache.spark.scheduler.ExecutorDecommissionInfo(why, jvm.scala.Option.empty())
    # adjustTargetNumExecutors false: the total was set already (true would lower it once more);
    # triggeredByExecutor false: the driver tells the executor to go
    return [executor for executor in executors if backend.decommissionExecutor(executor, info, False, False)]


# --- Hadoop FileSystem: the runtime's own files in a checkpoint on an object store (s3a://) ---------
# Through the session's Hadoop configuration, so they are read and written exactly as Spark reaches the
# rest of the checkpoint (same fs.s3a.* settings, same credentials).

# Spark's own setting for the class that writes checkpoint files (offsets, commits, state store
# files): an internal SQL setting, so it is set per session, not in spark.properties.
CHECKPOINT_FILE_MANAGER = "spark.sql.streaming.checkpointFileManagerClass"
# The one that writes through Hadoop's FileSystem API; its package moved in Spark 4.1 (the upgrade
# test runs the runtime on the previous Spark too).
_FILE_SYSTEM_MANAGERS = (
    "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager",
    "org.apache.spark.sql.execution.streaming.FileSystemBasedCheckpointFileManager",
)


def file_system_checkpoint_manager(spark) -> str:
    """The class name of Spark's FileSystem-based checkpoint file manager on the running Spark.

    Spark's default for a local path writes through Hadoop's FileContext, whose rename reads both
    paths as links and whose create sets the file's mode: without Hadoop's native library (no Maven
    artefact carries it) each of those forks ``readlink`` or ``chmod`` from the JVM, several processes
    per checkpoint file and several files on every batch's path (the cost: bench/README.md, "How the data-plane figures were reached")."""
    jvm = spark.sparkContext._jvm
    for name in _FILE_SYSTEM_MANAGERS:
        try:
            jvm.java.lang.Class.forName(name)
            return name
        except Exception:  # noqa: BLE001 - py4j's error for a class this Spark does not have
            continue
    raise RuntimeError(f"none of {', '.join(_FILE_SYSTEM_MANAGERS)} on this Spark")


def _fs_path(spark, location: str):
    jvm = spark.sparkContext._jvm
    path = jvm.org.apache.hadoop.fs.Path(location)
    return path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration()), path


def fs_read_text(spark, location: str) -> str | None:
    """The file's text, or None when there is none."""
    fs, path = _fs_path(spark, location)
    if not fs.exists(path):
        return None
    stream = fs.open(path)
    try:
        return spark.sparkContext._jvm.org.apache.commons.io.IOUtils.toString(stream, "UTF-8")
    finally:
        stream.close()


def fs_write_text(spark, location: str, text: str) -> None:
    """Replace the file; an object store makes it visible whole when the stream closes (one PUT)."""
    fs, path = _fs_path(spark, location)
    stream = fs.create(path, True)
    try:
        stream.write(bytearray(text.encode("utf-8")))
    finally:
        stream.close()


def fs_names(spark, location: str) -> list[str]:
    """The entries of a folder (none when it does not exist)."""
    fs, path = _fs_path(spark, location)
    if not fs.exists(path):
        return []
    return sorted(status.getPath().getName() for status in fs.listStatus(path))


def fs_entries(spark, location: str) -> list[tuple[str, bool]]:
    """The entries of a folder, each with whether it is a folder (none when it does not exist): one
    listing, where a test per entry would cost a request each on an object store."""
    fs, path = _fs_path(spark, location)
    if not fs.exists(path):
        return []
    return sorted((status.getPath().getName(), bool(status.isDirectory())) for status in fs.listStatus(path))


def fs_copy_file(spark, source: str, target: str) -> None:
    """Copy one file as it is between two locations, either of which may be a local path (no scheme):
    that side is a plain file (Hadoop's local FileSystem would add checksum files). FileNotFoundError
    when the source is gone."""
    from urllib.parse import urlparse

    from py4j.protocol import Py4JJavaError

    jvm = spark.sparkContext._jvm
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    util = jvm.org.apache.hadoop.fs.FileUtil

    def side(location: str):
        return jvm.java.io.File(location) if not urlparse(location).scheme else _fs_path(spark, location)

    src, dst = side(source), side(target)
    try:
        if not isinstance(src, tuple):
            util.copy(src, *dst, False, conf)
        elif not isinstance(dst, tuple):
            util.copy(*src, dst, False, conf)
        else:
            util.copy(*src, *dst, False, conf)
    except Py4JJavaError as exc:
        if exc.java_exception.getClass().getName() == "java.io.FileNotFoundException":
            raise FileNotFoundError(2, "No such file", source) from exc
        raise


def fs_delete_tree(spark, location: str) -> bool:
    """Delete a folder and everything under it, or a file (an object store: every object of the
    prefix); False when nothing was there."""
    fs, path = _fs_path(spark, location)
    return bool(fs.exists(path)) and bool(fs.delete(path, True))


def fs_tree_bytes(spark, location: str) -> int:
    """The bytes of every file under a folder (0 when it does not exist): one recursive listing."""
    fs, path = _fs_path(spark, location)
    return int(fs.getContentSummary(path).getLength()) if fs.exists(path) else 0


# Named sources (Spark 4.2, experimental): with source evolution on, the runtime names every Kafka
# reader after its source or table, and a checkpoint made with offset log format 2 keys its offsets (and
# so its state) by those names, so a source can be added to or removed from a query. Not on by default:
# Spark 4.2 cannot restart a format-2 checkpoint whose last batch was not committed (a crash mid-batch),
# tests/runtime/test_named_sources.py; docs/runtime.md, "Spark 4.2".
SOURCE_EVOLUTION = "spark.sql.streaming.queryEvolution.enableSourceEvolution"
OFFSET_LOG_FORMAT = "spark.sql.streaming.offsetLog.formatVersion"


def name_source(spark, reader, name: str):
    """``reader.name(name)`` when the session names its sources (source evolution on: then Spark refuses
    an unnamed one), else the reader as it is (Spark refuses a name then; pyspark before 4.2 has none)."""
    if spark.conf.get(SOURCE_EVOLUTION, "false").lower() != "true" or not hasattr(reader, "name"):
        return reader
    return reader.name(name)



# The column metadata by which Spark's analyzer knows a column carries the query's event-time
# watermark, and with which delay (EventTimeWatermark.delayKey); withWatermark sets it.
WATERMARK_DELAY_KEY = "spark.watermarkDelayMs"


def carries_watermark(column, name: str, delay_ms: int):
    """``column`` named ``name``, marked as carrying the watermark the query already has. For a column
    computed after an operator that passed the watermark through (transformWithState without a clock),
    where Spark refuses a second withWatermark ("Redefining watermark is disallowed") but a window,
    a stream join or append mode downstream needs a watermarked column."""
    return column.alias(name, metadata={WATERMARK_DELAY_KEY: delay_ms})


# --- What Spark itself reads in SQL text, and what an analysed plan would run (run/plan_guard.py) ---
# The admission check reads expressions with sqlglot; Spark reads them with its own parser, and where
# the two differ (nested comments, hints, escapes, ${...} substitution) only Spark's reading counts.
# Catalyst trees through py4j: each node's children, a plan's expressions and inner children (CTE
# definitions, subquery plans), a subquery expression's plan.
_QUERY_PLAN = "org.apache.spark.sql.catalyst.plans.QueryPlan"
_PLAN_EXPRESSION = "org.apache.spark.sql.catalyst.expressions.PlanExpression"
# Unresolved calls as the parser leaves them: the node's simple class name -> its name parts.
_UNRESOLVED_CALLS = {
    "UnresolvedFunction": lambda node: _seq(node.nameParts()),
    "UnresolvedTableValuedFunction": lambda node: _seq(node.name()),
    "UnresolvedGenerator": lambda node: [node.name().funcName()],
}
# IDENTIFIER('name')(...): the function's name is an expression the analyser folds; a literal one is
# read here, a computed one only shows in the analysed plan.
_IDENTIFIER_CALLS = ("ExpressionWithUnresolvedIdentifier", "PlanWithUnresolvedIdentifier")


def _catalyst_nodes(spark, root):
    """Every node of a Catalyst tree, depth first: plan nodes, their expressions, their inner children
    (CTE definitions, subquery plans) and the plans inside subquery expressions."""
    jvm = spark.sparkContext._jvm
    query_plan = jvm.java.lang.Class.forName(_QUERY_PLAN)
    plan_expression = jvm.java.lang.Class.forName(_PLAN_EXPRESSION)
    todo = [root]
    while todo:
        node = todo.pop()
        yield node
        todo.extend(_seq(node.children()))
        if query_plan.isInstance(node):
            todo.extend(_seq(node.expressions()))
            todo.extend(_seq(node.innerChildren()))
        elif plan_expression.isInstance(node):
            todo.append(node.plan())


def _identifier_parts(node) -> list[str]:
    literal = node.identifierExpr()
    if _simple_name(literal) != "Literal" or literal.value() is None:
        return []
    return [part.strip("`") for part in str(literal.value().toString()).split(".")]


def functions_spark_reads(spark, text: str, statement: bool = False) -> frozenset[tuple[str, ...]]:
    """The name parts of every function ``text`` calls as Spark's own parser reads it, nothing looked
    up: ``parseExpression`` (a filter, a select item, ...) or ``parsePlan`` (an sql step). The session's
    SQL settings apply (``spark.sql.variable.substitute``). Raises Spark's ParseException when the text
    does not parse."""
    parser = spark._jsparkSession.sessionState().sqlParser()
    tree = parser.parsePlan(text) if statement else parser.parseExpression(text)
    found: set[tuple[str, ...]] = set()
    for node in _catalyst_nodes(spark, tree):
        kind = _simple_name(node)
        if kind in _UNRESOLVED_CALLS:
            found.add(tuple(str(part) for part in _UNRESOLVED_CALLS[kind](node)))
        elif kind in _IDENTIFIER_CALLS:
            parts = _identifier_parts(node)
            if parts:
                found.add(tuple(parts))
    return frozenset(found)


def function_class(spark, name: str) -> str | None:
    """The expression class Spark's function registry builds for the built-in function ``name``
    (ExpressionInfo.getClassName), or None when it has none of that name."""
    jvm = spark.sparkContext._jvm
    # Spark 4.2's registry keys built-ins by their 3-part name: system.builtin.<name>
    identifier = jvm.org.apache.spark.sql.catalyst.FunctionIdentifier(name, jvm.scala.Option.apply("builtin"),
                                                                      jvm.scala.Option.apply("system"))
    info = spark._jsparkSession.sessionState().functionRegistry().lookupFunction(identifier)
    return str(info.get().getClassName()) if info.isDefined() else None


def plan_classes(df, optimized: bool = False) -> frozenset[str]:
    """The JVM class of every node of ``df``'s analysed (or optimised) logical plan, its expressions and
    its subquery plans included: what the query would run, however its text was written."""
    execution = df._jdf.queryExecution()
    root = execution.optimizedPlan() if optimized else execution.analyzed()
    return frozenset(str(node.getClass().getName()) for node in _catalyst_nodes(df.sparkSession, root))


# --- Which rows a micro-batch's partition holds (sinks/replay.py) -----------------------------------
# foreachBatch gets the batch as a scan of the RDD the query's plan made (Spark 4.2: RDDScanExec, below
# whole-stage code generation); that RDD's lineage shows where each partition's rows come from.
_SCAN_ABOVE = frozenset({"WholeStageCodegenExec", "InputAdapter", "ProjectExec", "FilterExec", "ColumnarToRowExec"})
_STATE_RDD = "StateStoreRDD"  # a stateful operator's partitions, one state store partition each
_ONE_TO_ONE = "org.apache.spark.OneToOneDependency"


def partitioned_by_state(df) -> bool:
    """Whether partition ``p`` of ``df`` (a micro-batch inside foreachBatch) holds the rows a stateful
    operator emitted from its state partition ``p``, row by row: the RDD it scans descends through
    one-to-one dependencies only (no shuffle, no union) from a StateStoreRDD with the session's shuffle
    partitions. False when the plan is of another shape."""
    try:
        node = df._jdf.queryExecution().executedPlan()
        while _simple_name(node) != "RDDScanExec":
            children = _seq(node.children())
            if _simple_name(node) not in _SCAN_ABOVE or len(children) != 1:
                return False
            node = children[0]
        rdd = node.rdd()
        while _simple_name(rdd) != _STATE_RDD:
            dependencies = _seq(rdd.dependencies())
            if len(dependencies) != 1 or dependencies[0].getClass().getName() != _ONE_TO_ONE:
                return False
            rdd = dependencies[0].rdd()
        return rdd.getNumPartitions() == int(df.sparkSession.conf.get("spark.sql.shuffle.partitions"))
    except Exception:  # noqa: BLE001 - an unexpected plan: the rows are partitioned by content instead
        log.debug("lineage of a micro-batch not read", exc_info=True)
        return False


# --- A micro-batch query's stop after its batch in flight --------------------------------------------

# The state a stopped query is in; the loop of a micro-batch query reads it before each batch (the one
# Spark itself sets when an available-now query has nothing left), and query.stop() interrupts instead.
_TERMINATED = "org.apache.spark.sql.execution.streaming.runtime.TERMINATED$"


def start_no_new_batch(spark, query) -> bool:
    """Have a micro-batch query start no new batch: the batch in flight finishes and commits (one that
    has not begun its work yet is dropped, to be replayed from its offsets on the next start), then the
    query ends as a stopped one. False when this Spark's query is not as expected (then stop() it)."""
    try:
        terminated = spark.sparkContext._jvm.java.lang.Class.forName(_TERMINATED).getField("MODULE$").get(None)
        query._jsq.streamingQuery().state().set(terminated)
        return True
    except Exception as exc:  # noqa: BLE001 - the caller stops the query the plain way
        log.warning("query %s: cannot end it after its batch in flight (%s); stopping it now", query.name, exc)
        return False
