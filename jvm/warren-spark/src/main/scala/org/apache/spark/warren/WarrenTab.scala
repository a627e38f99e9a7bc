package org.apache.spark.warren

import scala.util.control.NonFatal
import scala.xml.Node

import io.warren.spark.{JobBoard, WarrenJobStatus}
import org.apache.spark.SparkContext
import org.apache.spark.ui.{SparkUI, SparkUITab, UIUtils, WebUIPage}
import org.slf4j.LoggerFactory

/** The Spark UI's "Warren" tab (`/warren/`): every Warren job of the application with its
  * state, workers, checkpoint version (its iterations, with one checkpoint per iteration),
  * re-run tasks and failed attempts, and each job's task attempts with their executor, host,
  * state and checkpoint version. Versions of running tasks come with the executors'
  * heartbeats (`spark.executor.heartbeatInterval`, 10 s by default), so the page is at most
  * that far behind; reload it to follow a job.
  *
  * In this package because Spark's UI classes are visible only to `org.apache.spark`.
  */
private[spark] final class WarrenTab(ui: SparkUI, board: JobBoard) extends SparkUITab(ui, "warren") {
  attachPage(new WarrenPage(this, board))
}

/** The tab's one page. */
private[spark] final class WarrenPage(tab: WarrenTab, board: JobBoard) extends WebUIPage("") {

  /** Renders the jobs, the newest first. */
  override def render(request: UiServlet.Request): Seq[Node] = {
    val now = System.currentTimeMillis()
    val jobs = board.all
    val content =
      <div>
        <p>Warren jobs of this application, the newest first. A running task's checkpoint version
        comes with its executor's heartbeat (every <code>spark.executor.heartbeatInterval</code>):
        reload the page to follow a job. With one checkpoint per iteration, the version is the
        iteration the job has reached.</p>
        {if (jobs.isEmpty) <p>No Warren job has run yet.</p> else jobsTable(jobs, now)}
        {jobs.take(WarrenPage.JobsWithTasks).flatMap(j => tasksTable(j, now))}
      </div>
    UIUtils.headerSparkPage(request, "Warren", content, tab)
  }

  private def jobsTable(jobs: Seq[WarrenJobStatus], now: Long): Seq[Node] =
    <table class="table table-bordered table-sm" id="warren-jobs">
      <thead><tr><th>Job</th><th>State</th><th>Workers</th><th>Recovery</th><th>Checkpoint version</th>
        <th>Re-run tasks</th><th>Failed attempts</th><th>Started</th><th>Duration</th></tr></thead>
      <tbody>{
        jobs.map { j =>
          <tr class="warren-job" data-job={j.label} data-state={j.state} data-version={j.checkpointVersion.toString}>
            <td><a href={s"#warren-job-${j.label}"}>{j.label}</a></td>
            <td>{j.state}{j.failure.map(f => <div class="text-muted">{f}</div>).getOrElse(Seq.empty[Node])}</td>
            <td>{j.workers}</td><td>{j.recovery}</td><td>{j.checkpointVersion}</td><td>{j.reruns}</td>
            <td>{j.failedAttempts}</td><td>{UIUtils.formatDate(j.startedMs)}</td>
            <td>{UIUtils.formatDuration((j.seconds(now) * 1000).toLong)}</td>
          </tr>
        }
      }</tbody>
    </table>

  private def tasksTable(j: WarrenJobStatus, now: Long): Seq[Node] =
    <h4 id={s"warren-job-${j.label}"}>Job {j.label}: task attempts</h4>
    <table class="table table-bordered table-sm">
      <thead><tr><th>Task id</th><th>Attempt</th><th>Stage attempt</th><th>Executor</th><th>Host</th>
        <th>State</th><th>Checkpoint version</th><th>Last heard</th></tr></thead>
      <tbody>{
        j.tasks.map { t =>
          <tr class="warren-task" data-job={j.label} data-task={t.partition.toString} data-version={t.checkpointVersion.toString}>
            <td>{t.partition}</td><td>{t.attempt}</td><td>{t.stageAttempt}</td><td>{t.executor}</td><td>{t.host}</td>
            <td>{t.state}</td><td>{t.checkpointVersion}</td>
            <td>{UIUtils.formatDuration(math.max(0L, now - t.updatedMs))} ago</td>
          </tr>
        }
      }</tbody>
    </table>
}

/** The page's limits. */
private[spark] object WarrenPage {

  /** How many of the newest jobs the page lists the task attempts of. */
  val JobsWithTasks = 10
}

/** Attaches the Warren tab to a context's UI. */
object WarrenTab {
  private val log = LoggerFactory.getLogger(classOf[WarrenTab])

  /** Adds the tab showing `board` to `sc`'s Spark UI; nothing if the UI is off
    * (`spark.ui.enabled=false`). A Spark whose UI classes differ from those Warren was built
    * against gets no tab (a warning says so); the job runs as before.
    *
    * @param sc the context
    * @param board its jobs
    */
  def attach(sc: SparkContext, board: JobBoard): Unit =
    try sc.ui.foreach(ui => ui.attachTab(new WarrenTab(ui, board)))
    catch {
      case e @ (NonFatal(_) | _: LinkageError) =>
        log.warn(s"the Spark UI has no Warren tab: this Spark's UI classes differ from Warren's ($e)")
    }
}
