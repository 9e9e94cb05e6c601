# Source this file: the environment the local Airflow of dblog-etl runs in.
#   . bin/airflow-env.sh            (then: airflow dags test dblog_nightly 2026-11-01, ...)
# Everything can be overridden by setting it before sourcing (AIRFLOW_HOME, AIRFLOW_PORT,
# DBLOG_DATA_ROOT, DBLOG_CONFIG, DBLOG_SCHEDULE, DBLOG_SPARK_MASTER_URL).
DBLOG_REPO="$(cd "$(dirname "${BASH_SOURCE[0]:-$0}")/.." && pwd)"
export DBLOG_REPO
export AIRFLOW_HOME="${AIRFLOW_HOME:-$DBLOG_REPO/.airflow}"
export AIRFLOW_PORT="${AIRFLOW_PORT:-8080}"
export AIRFLOW__CORE__DAGS_FOLDER="$DBLOG_REPO/dags"
export AIRFLOW__CORE__PLUGINS_FOLDER="$DBLOG_REPO/plugins"
export AIRFLOW__CORE__LOAD_EXAMPLES=False
export AIRFLOW__API__PORT="$AIRFLOW_PORT"
export AIRFLOW__CORE__EXECUTION_API_SERVER_URL="http://localhost:$AIRFLOW_PORT/execution/"
# local runs: everyone is admin, no login (set to False to log in with the generated password)
export AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS="${AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS:-True}"
export AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL="${AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL:-30}"
# the Spark connection of the DAG's spark-submit tasks (JSON: a URI form is read as yarn)
export AIRFLOW_CONN_SPARK_LOCAL="${AIRFLOW_CONN_SPARK_LOCAL:-{\"conn_type\": \"spark\", \"host\": \"${DBLOG_SPARK_MASTER_URL:-local[2]}\"}}"
export DBLOG_DATA_ROOT="${DBLOG_DATA_ROOT:-$DBLOG_REPO/data}"
export PATH="$DBLOG_REPO/.venv/bin:$PATH"          # airflow, spark-submit
export PYSPARK_PYTHON="$DBLOG_REPO/.venv/bin/python"
export PYSPARK_DRIVER_PYTHON="$DBLOG_REPO/.venv/bin/python"
# the embedded SQLite database: writers wait for the lock up to 2 min (pysqlite's 5 s gave
# up under load; see dblog/airflow_sqlite.py). Not for PostgreSQL/MySQL.
case "${AIRFLOW__DATABASE__SQL_ALCHEMY_CONN:-sqlite}" in
  sqlite*)
    export AIRFLOW__DATABASE__SQL_ALCHEMY_CONNECT_ARGS="${AIRFLOW__DATABASE__SQL_ALCHEMY_CONNECT_ARGS:-dblog.airflow_sqlite.CONNECT_ARGS}"
    export AIRFLOW__DATABASE__SQL_ALCHEMY_CONNECT_ARGS_ASYNC="${AIRFLOW__DATABASE__SQL_ALCHEMY_CONNECT_ARGS_ASYNC:-dblog.airflow_sqlite.CONNECT_ARGS_ASYNC}" ;;
esac
export GX_ANALYTICS_ENABLED=false
export TQDM_DISABLE=1
mkdir -p "$AIRFLOW_HOME"
