package io.warren.examples

import java.io.File

import org.apache.spark.{SparkConf, SparkContext}

/** The SparkContext of the local-cluster test classes: executor JVMs of one core and 1 GiB on
  * 127.0.0.1, Spark from `$SPARK_HOME` (scripts/setup-spark.sh), this project's classes and
  * jars on the executors' class path, and the Warren deadlines the tests use.
  */
object LocalCluster {

  /** Starts a context on `local-cluster[executors,1,1024]`.
    *
    * @param executors the number of executor JVMs (one task slot each)
    * @param appName the application's name
    * @return the context; the caller stops it
    */
  def start(executors: Int, appName: String): SparkContext = {
    val home = sys.env.getOrElse("SPARK_HOME", throw new IllegalStateException("SPARK_HOME is not set"))
    val cp = System.getProperty("surefire.test.class.path", System.getProperty("java.class.path"))
    // Executors get Spark from $SPARK_HOME/jars; add this project's classes and jars.
    val ours = cp
      .split(File.pathSeparator)
      .filter(e => !e.startsWith(home) && !e.contains("/.spark/") && (e.contains("warren") || e.contains("/target/")))
    val conf = new SparkConf()
      .setMaster(s"local-cluster[$executors,1,1024]")
      .setAppName(appName)
      .setSparkHome(home)
      .set("spark.driver.host", "127.0.0.1")
      .set("spark.driver.bindAddress", "127.0.0.1")
      .set("spark.ui.enabled", "false")
      .set("spark.executor.extraClassPath", ours.mkString(File.pathSeparator))
      .set("spark.warren.connectTimeout", "120")
      .set("spark.warren.timeout", "300")
    new SparkContext(conf)
  }
}
