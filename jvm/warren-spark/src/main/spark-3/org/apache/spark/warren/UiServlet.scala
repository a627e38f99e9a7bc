package org.apache.spark.warren

/** The servlet API of Spark's UI on this Spark line: Java Servlet (`javax`), as Spark 3 uses. */
private[spark] object UiServlet {

  /** The request a UI page renders. */
  type Request = javax.servlet.http.HttpServletRequest
}
