/**
 * One job at full size: its state, larger loss and throughput charts, and a log tail that follows.
 */
import React, { useEffect, useRef } from 'react';

import { DEFAULT_SMOOTHING } from '../chart';
import { IDoctorAPI } from '../doctor';
import { IJobDetail } from '../handler';
import { IFollowedJob } from '../model';
import { chartJob, JobCharts } from './JobChart';
import { BudgetWarning, rowFacts, TrainingWarning } from './JobRow';
import { RunDoctor } from './RunDoctor';

export interface IJobDetailProps extends IFollowedJob {
  /** Charts and facts too, or only the log. */
  charts: boolean;
  /** The run doctor's calls: with them, a running job shows its ranks and the Stacks, Checkpoint now, Fork buttons. */
  doctor?: IDoctorAPI;
  /** Switch the log between one line per logging step and the program's own output (`rawLog`). */
  onRawLog?: (raw: boolean) => void;
}

/** A log that stays scrolled to its end while the reader has not scrolled up. */
export function LogTail(props: { text: string }): JSX.Element {
  const ref = useRef<HTMLPreElement>(null);
  const following = useRef(true);
  useEffect(() => {
    const element = ref.current;
    if (element && following.current) {
      element.scrollTop = element.scrollHeight;
    }
  }, [props.text]);
  const onScroll = () => {
    const element = ref.current;
    if (element) {
      following.current =
        element.scrollHeight - element.scrollTop - element.clientHeight < 24;
    }
  };
  return (
    <pre className="nbt-LogTail" ref={ref} onScroll={onScroll}>
      {props.text || 'no output yet'}
    </pre>
  );
}

export function JobDetail(props: IJobDetailProps): JSX.Element {
  const { job, records, log, rawLog, error, charts, doctor, onRawLog } = props;
  return (
    <div className="nbt-JobDetail">
      {error && (
        <div className="nbt-JobList-error" role="alert">
          {error}
        </div>
      )}
      {job && (
        <header className="nbt-JobDetail-header">
          <h2>{`${job.name} `}</h2>
          <span className={`nbt-JobRow-status nbt-mod-${job.status}`}>
            {job.display.status}
          </span>
          <span className="nbt-JobRow-launcher">{job.backend}</span>
          <span className="nbt-JobRow-id">{job.id}</span>
          {charts && (
            <div className="nbt-JobRow-facts">
              {[job.display.progress, ...rowFacts(job)]
                .filter(Boolean)
                .join(' · ')}
            </div>
          )}
          <BudgetWarning job={job} />
          <TrainingWarning job={job} />
          {job.message && (
            <div className="nbt-JobRow-message">{job.message}</div>
          )}
        </header>
      )}
      {charts && job?.active && doctor && (
        <RunDoctor jobId={job.id} api={doctor} />
      )}
      {charts &&
        job &&
        (job.planned.length > 0 ||
          job.tracking.length > 0 ||
          job.model_from ||
          job.harness) && (
          <dl className="nbt-JobDetail-facts">
            {job.model_from && (
              <>
                <dt>model from</dt>
                <dd className="nbt-JobDetail-lineage">job {job.model_from}</dd>
              </>
            )}
            {job.planned.length > 0 && (
              <>
                <dt>planned</dt>
                <dd>
                  <pre className="nbt-JobDetail-planned">
                    {job.planned.join('\n')}
                  </pre>
                </dd>
              </>
            )}
            {job.tracking.length > 0 && (
              <>
                <dt>tracking</dt>
                <dd className="nbt-JobDetail-tracking">
                  {job.tracking.join(' · ')}
                </dd>
              </>
            )}
            {job.harness && (
              <>
                <dt>lm-eval</dt>
                <dd>
                  <HarnessTable rows={job.harness.rows} />
                  {job.harness.note && (
                    <div className="nbt-JobDetail-harnessNote">
                      {job.harness.note}
                    </div>
                  )}
                </dd>
              </>
            )}
          </dl>
        )}
      {charts && (
        <JobCharts
          jobs={[chartJob(job?.id ?? '', job, records)]}
          options={{ smoothing: DEFAULT_SMOOTHING, logScale: false }}
        />
      )}
      {onRawLog && (
        <label
          className="nbt-LogTail-raw"
          title="The log as the program wrote it; unticked, one line per logging step"
        >
          <input
            type="checkbox"
            checked={rawLog}
            onChange={event => onRawLog(event.currentTarget.checked)}
          />
          raw output
        </label>
      )}
      <LogTail text={log} />
    </div>
  );
}

/** The job's last lm-evaluation-harness comparison: base beside tuned per task and metric. */
function HarnessTable({
  rows
}: {
  rows: NonNullable<IJobDetail['harness']>['rows'];
}): JSX.Element {
  const number = (value: number | null | undefined, sign = false): string =>
    value === null || value === undefined
      ? '-'
      : `${sign && value > 0 ? '+' : ''}${value.toFixed(4)}`;
  const withError = (value: number | null, error: number | null): string =>
    error === null ? number(value) : `${number(value)} ± ${number(error)}`;
  return (
    <table className="nbt-JobDetail-harness">
      <thead>
        <tr>
          <th>task</th>
          <th>metric</th>
          <th>base</th>
          <th>tuned</th>
          <th>difference</th>
        </tr>
      </thead>
      <tbody>
        {rows.map(row => (
          <tr key={`${row.task} ${row.metric}`}>
            <td>{row.task}</td>
            <td>{row.metric}</td>
            <td>{withError(row.base, row.base_stderr)}</td>
            <td>{withError(row.tuned, row.tuned_stderr)}</td>
            <td>{number(row.difference, true)}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}
