package io.warren.examples

import java.nio.file.{Files, Path}

import scala.jdk.CollectionConverters._
import scala.util.Using

import io.warren.{Communicator, Master, MasterClient, MasterStatus, MasterTask, Op}
import io.warren.examples.RecordIOStep.{Checkpointed, State, accumulate, slotTask}
import io.warren.spark._
import org.apache.spark.{SparkConf, SparkContext}

/** Logistic regression whose workers pull RecordIO shards (tasks of chunks) from a data
  * [[io.warren.Master]] on the driver instead of reading RDD partitions.
  *
  * The dataset's files must be readable at the same path by every executor (a shared file
  * system; on `local-cluster`, the local disk).
  *
  * {{{
  * spark-submit --master 'local-cluster[3,1,1024]' --class io.warren.examples.RecordIOTraining \
  *   --jars warren-core.jar,warren-runner.jar,warren-spark_2.13.jar warren-spark-examples_2.13.jar \
  *   --workers 3 --records 600 --passes 2 --kill-task 5
  * }}}
  *
  * The command line is [[RecordIOCommandLine]]'s; its failures are [[FaultHarness]]'s
  * (`--kill-task STEP` with `--kill-point get|allreduce|checkpoint`).
  *
  * Each step, every worker asks the master for one task without waiting, reads its records
  * ("id,label,f1,...,fn", written by [[RecordIOData]]), and adds their gradient, loss and a
  * count per record id to one allreduce; the weights move by the mean gradient and the step
  * ends with a checkpoint. Only then does a worker report its task finished, so every record is
  * read at least once per pass, exactly once unless a task times out. The docs' Spark guide
  * ("RecordIO training: tasks pulled from a master on the driver") says why, and how a
  * restarted worker replays a step from its peers.
  */
object RecordIOTraining {

  /** The job's parameters.
    *
    * @param workers Warren workers (Spark tasks running together)
    * @param records records in the dataset (ids 0 until records)
    * @param features features per record
    * @param files RecordIO files the dataset is written to
    * @param chunkBytes largest chunk of the files, in bytes (small: many tasks)
    * @param chunksPerTask chunks per master task
    * @param passes passes over the dataset
    * @param stepSize the learning rate
    * @param seed seed of the data
    * @param taskTimeoutMs the master's task timeout (lower bound and initial value)
    * @param pollMs pause of a step in which no worker had a task and the pass is not over
    * @param maxIdleSteps such steps in a row before the job gives up (a deadline)
    * @param conf `spark.warren.*` settings for the runner
    * @param store the master's store (`file:DIR` or `etcd:HOST:PORT[/PREFIX]`); None: a file
    *     store beside the dataset
    * @param dataDir directory, readable by every executor, in which the dataset is written (a
    *     new subdirectory); None: a temporary directory of the driver's machine
    * @param hooks calls into the worker loop ([[FaultHarness]] injects failures through them: at
    *     the `start` of a step, holding a task; after its `allreduce`; after its `checkpoint`,
    *     before the task is reported)
    */
  case class Params(
      workers: Int = 3,
      records: Int = 600,
      features: Int = 4,
      files: Int = 3,
      chunkBytes: Int = 1000,
      chunksPerTask: Int = 2,
      passes: Int = 2,
      stepSize: Double = 1.0,
      seed: Long = 20240601L,
      taskTimeoutMs: Long = 3000,
      pollMs: Long = 100,
      maxIdleSteps: Int = 1200,
      conf: Map[String, String] = Map.empty,
      store: Option[String] = None,
      dataDir: Option[String] = None,
      hooks: Hooks = Hooks.none
  ) {
    require(workers >= 1 && records >= 1 && features >= 1 && files >= 1 && passes >= 1, s"bad parameters $this")
  }

  /** What a run gives back (rank 0's view; every rank has the same).
    *
    * @param weights the final weights (the last one is the intercept)
    * @param reads `reads(pass)(id)`: how many times record `id` went into an allreduce in `pass`
    * @param losses mean log loss of the records read in each pass
    * @param steps steps (allreduce + checkpoint) taken
    * @param recoveries recoveries rank 0 took part in
    * @param status the master's status after the job
    */
  case class Result(
      weights: Array[Double],
      reads: Array[Array[Int]],
      losses: Array[Double],
      steps: Long,
      recoveries: Long,
      status: MasterStatus
  )

  /** One worker: a step per task, until every pass is over. */
  private def worker(p: Params, master: Map[String, String])(comm: Communicator, unused: Iterator[Int]): Result = {
    val rank = comm.rank()
    val s = new State(p)
    val d = s.d
    Using.resource(MasterClient.connect(master.asJava)) { client =>
      for ((_, c) <- comm.loadCheckpointAs[Checkpointed]) {
        s.restore(c)
        // The predecessor may have died between the checkpoint and reporting its task.
        slotTask(s.slots, rank, s.pass).foreach(client.finish)
      }
      val hooks = p.hooks.worker(p.workers, comm)
      // Per step: gradient (d), loss, records, has a task, pass over, slots (2 x workers), reads per id.
      val base = d + 4
      val buf = new Array[Double](base + 2 * p.workers + p.records)
      while (s.pass < p.passes) {
        java.util.Arrays.fill(buf, 0.0)
        val t = client.getTask(s.pass)
        val step = s.step.toInt
        hooks.beforeIteration(step) // holding a task
        t.kind match {
          case MasterTask.Kind.TASK =>
            t.records.asScala.foreach(accumulate(p, s.w, t.id, _, buf, base + 2 * p.workers))
            buf(d + 2) = 1
            buf(base + 2 * rank) = t.id + 1.0
            buf(base + 2 * rank + 1) = t.epoch.toDouble
          case MasterTask.Kind.PASS_FINISHED => buf(d + 3) = 1
          case MasterTask.Kind.NONE_NOW      =>
        }
        comm.allreduce(buf, Op.SUM)
        hooks.afterAllreduce(step)
        System.arraycopy(buf, base, s.slots, 0, s.slots.length)
        val mine = slotTask(s.slots, rank, s.pass)
        if (t.isTask && !mine.exists(m => m.id == t.id && m.epoch == t.epoch)) {
          // A replayed step: the result holds the predecessor's task, not this one.
          client.fail(t, s"not in step ${s.step}'s allreduce (replayed for a restarted worker)")
        }
        val n = buf(d + 1)
        if (n > 0) for (j <- 0 until d) s.w(j) -= p.stepSize * buf(j) / n
        s.lossSum(0) += buf(d)
        s.lossSum(1) += n
        for (i <- 0 until p.records) s.reads(s.pass)(i) += buf(base + 2 * p.workers + i).toInt
        val anyTask = buf(d + 2) > 0
        if (buf(d + 3) > 0) {
          s.losses(s.pass) = if (s.lossSum(1) > 0) s.lossSum(0) / s.lossSum(1) else 0.0
          java.util.Arrays.fill(s.lossSum, 0.0)
          s.pass += 1
        }
        s.idle = if (anyTask || buf(d + 3) > 0) 0 else s.idle + 1
        s.step += 1
        comm.checkpoint(s.checkpointed)
        hooks.afterCheckpoint(step, None) // before the task is reported
        // The contribution is in a checkpoint: now the task may be reported finished.
        mine.foreach(client.finish)
        if (s.idle >= p.maxIdleSteps) {
          throw new IllegalStateException(
            s"pass ${s.pass}: no worker got a task for ${s.idle} steps; master status ${client.status()}"
          )
        }
        if (s.idle > 0) Thread.sleep(p.pollMs)
      }
    }
    Result(s.w.clone(), s.reads.map(_.clone()), s.losses.clone(), s.step, comm.recoveries(), null)
  }

  /** Writes the dataset to `dir`, starts a master on it (`p.store`, by default a file store in
    * `dir`), and trains.
    *
    * @param sc the context (needs `p.workers` free task slots)
    * @param p the parameters
    * @param dir an empty directory for the dataset and the master's queue
    * @return rank 0's result with the master's final status
    */
  def run(sc: SparkContext, p: Params, dir: Path): Result = {
    val glob = RecordIOData.writeDataset(p, dir)
    Using.resource(
      Master
        .builder()
        .dataset(glob)
        .chunksPerTask(p.chunksPerTask)
        .store(p.store.getOrElse("file:" + dir.resolve("queue")))
        .secret(java.util.UUID.randomUUID().toString)
        .timeouts(p.taskTimeoutMs, p.taskTimeoutMs)
        .maxFailures(10)
        .tls(WarrenSpark.tlsSettings(sc, p.conf)) // the workers reach it as they reach the tracker
        .start()
    ) { master =>
      val settings = master.workerSettings().asScala.toMap
      val results =
        WarrenSpark.train(sc.parallelize(0 until p.workers, p.workers), p.workers, p.conf)(worker(p, settings))
      results.head.copy(status = master.status())
    }
  }

  /** Entry point for spark-submit (the master comes from spark-submit).
    *
    * @param args the arguments of [[RecordIOCommandLine]]
    */
  def main(args: Array[String]): Unit = {
    val p = RecordIOCommandLine.parse(args.toList)
    val dir = p.dataDir match {
      case Some(shared) => Files.createTempDirectory(Path.of(shared), "warren-recordio-training")
      case None         => Files.createTempDirectory("warren-recordio-training")
    }
    val sc = new SparkContext(new SparkConf().setAppName("warren-recordio-training"))
    try {
      WarrenSpark.awaitSlots(sc, p.workers, 120)
      val r = run(sc, p, dir)
      r.losses.zipWithIndex.foreach { case (l, i) => println(f"pass ${i + 1}%3d loss $l%.10f") }
      r.reads.zipWithIndex.foreach { case (q, i) =>
        println(s"pass ${i + 1} records read at least once ${q.count(_ > 0)} of ${p.records}, reads ${q.sum}")
      }
      println(s"STEPS ${r.steps}")
      println(s"RECOVERIES ${r.recoveries}")
      println(s"MASTER ${r.status}")
    } finally {
      sc.stop()
      TempDirs.deleteTree(dir)
    }
  }
}
