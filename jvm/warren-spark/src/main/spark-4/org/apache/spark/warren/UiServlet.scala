package org.apache.spark.warren

/** The servlet API of Spark's UI on this Spark line: Jakarta Servlet, as Spark 4 uses. */
private[spark] object UiServlet {

  /** The request a UI page renders. */
  type Request = jakarta.servlet.http.HttpServletRequest
}
