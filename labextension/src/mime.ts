/**
 * The MIME renderer extension: notebook outputs of type JOB_MIME become live job charts drawn here
 * (see widgets/JobChartRenderer.tsx). Outputs also carry image/png, which front ends without it show.
 */
import { IRenderMime } from '@jupyterlab/rendermime-interfaces';

import { JOB_MIME } from './chart';
import { JobsClient } from './handler';
import { JobChartRenderer } from './widgets/JobChartRenderer';

const extension: IRenderMime.IExtension = {
  id: 'nbtoolkit:job-chart',
  description:
    'Job charts in notebook outputs, drawn in the browser from the job API.',
  rendererFactory: {
    safe: true,
    mimeTypes: [JOB_MIME],
    createRenderer: () => new JobChartRenderer(new JobsClient())
  },
  // ahead of image/png (rank 90), which the same output carries for other front ends
  rank: 0,
  dataType: 'json'
};

export default extension;
