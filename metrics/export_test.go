package metrics

// ScheduleMaxGap exposes scheduleMaxGap to the external tests.
var ScheduleMaxGap = scheduleMaxGap
